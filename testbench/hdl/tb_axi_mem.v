// tb_axi_mem: axi_mem and axi_checker on one AXI4 bus, for tests/cocotb_axi_mem.py.
//
// The bus is driven either from the s_axi_* ports (cocotbext-axi's AxiMaster, or
// cocotb by hand) or, while bench_en is high, by a small HDL read master that streams
// bench_bursts INCR bursts of bench_len+1 beats (IDs rotating) with RREADY always
// high, so the memory model's throughput can be measured with no Python per beat.
// It sums the 32-bit words it reads (bench_sum) and counts the cycles from its first
// R beat to its last (bench_cycles; == bench_beats when the bus never idles).
`default_nettype none

module tb_axi_mem #(
    parameter DATA_WIDTH = 64,
    parameter ADDR_WIDTH = 48,
    parameter ID_WIDTH   = 4,
    parameter MAX_READS  = 16,
    parameter MAX_WRITES = 16
) (
    input  wire                    clk,
    input  wire                    rst,

    input  wire [ID_WIDTH-1:0]     s_axi_awid,
    input  wire [ADDR_WIDTH-1:0]   s_axi_awaddr,
    input  wire [7:0]              s_axi_awlen,
    input  wire [2:0]              s_axi_awsize,
    input  wire [1:0]              s_axi_awburst,
    input  wire                    s_axi_awvalid,
    output wire                    s_axi_awready,
    input  wire [DATA_WIDTH-1:0]   s_axi_wdata,
    input  wire [DATA_WIDTH/8-1:0] s_axi_wstrb,
    input  wire                    s_axi_wlast,
    input  wire                    s_axi_wvalid,
    output wire                    s_axi_wready,
    output wire [ID_WIDTH-1:0]     s_axi_bid,
    output wire [1:0]              s_axi_bresp,
    output wire                    s_axi_bvalid,
    input  wire                    s_axi_bready,
    input  wire [ID_WIDTH-1:0]     s_axi_arid,
    input  wire [ADDR_WIDTH-1:0]   s_axi_araddr,
    input  wire [7:0]              s_axi_arlen,
    input  wire [2:0]              s_axi_arsize,
    input  wire [1:0]              s_axi_arburst,
    input  wire                    s_axi_arvalid,
    output wire                    s_axi_arready,
    output wire [ID_WIDTH-1:0]     s_axi_rid,
    output wire [DATA_WIDTH-1:0]   s_axi_rdata,
    output wire [1:0]              s_axi_rresp,
    output wire                    s_axi_rlast,
    output wire                    s_axi_rvalid,
    input  wire                    s_axi_rready,

    input  wire [15:0]             cfg_rd_latency,
    input  wire [15:0]             cfg_wr_latency,
    input  wire [7:0]              cfg_stall_aw,
    input  wire [7:0]              cfg_stall_w,
    input  wire [7:0]              cfg_stall_b,
    input  wire [7:0]              cfg_stall_ar,
    input  wire [7:0]              cfg_stall_r,
    input  wire [31:0]             cfg_seed,
    input  wire [ADDR_WIDTH-1:0]   cfg_err_base,
    input  wire [ADDR_WIDTH-1:0]   cfg_err_limit,
    input  wire [1:0]              cfg_err_resp,

    output wire                    chk_error,
    output wire [7:0]              chk_code,
    output wire [ADDR_WIDTH-1:0]   chk_addr,
    output wire [31:0]             chk_arg0,
    output wire [31:0]             chk_arg1,
    output wire [31:0]             chk_arg2,

    input  wire                    bench_en,
    input  wire [ADDR_WIDTH-1:0]   bench_addr,
    input  wire [31:0]             bench_mask,     // burst offsets wrap with this mask
    input  wire [31:0]             bench_bursts,
    input  wire [7:0]              bench_len,
    output reg                     bench_done,
    output reg  [31:0]             bench_beats,
    output reg  [31:0]             bench_cycles,
    output reg  [31:0]             bench_sum
);

    // ---------------------------------------------------------------- bench read master
    localparam integer FULL_SIZE_I = $clog2(DATA_WIDTH / 8);
    localparam [2:0] FULL_SIZE = FULL_SIZE_I[2:0];
    reg         bench_en_q, bench_seen;
    reg  [31:0] bench_k;   // AR bursts issued
    wire [31:0] bench_total  = bench_bursts * ({24'd0, bench_len} + 32'd1);
    wire [31:0] bench_stride = ({24'd0, bench_len} + 32'd1) * (DATA_WIDTH / 8);
    wire        b_arvalid    = bench_en && bench_en_q && bench_k != bench_bursts;
    wire [31:0] b_offset     = (bench_k * bench_stride) & bench_mask;
    wire [ADDR_WIDTH-1:0] b_araddr = bench_addr + {{(ADDR_WIDTH-32){1'b0}}, b_offset};

    // ---------------------------------------------------------------- the bus
    wire [ID_WIDTH-1:0]     m_awid    = s_axi_awid;
    wire [ADDR_WIDTH-1:0]   m_awaddr  = s_axi_awaddr;
    wire [7:0]              m_awlen   = s_axi_awlen;
    wire [2:0]              m_awsize  = s_axi_awsize;
    wire [1:0]              m_awburst = s_axi_awburst;
    wire                    m_awvalid = s_axi_awvalid && !bench_en;
    wire                    m_awready;
    wire [DATA_WIDTH-1:0]   m_wdata   = s_axi_wdata;
    wire [DATA_WIDTH/8-1:0] m_wstrb   = s_axi_wstrb;
    wire                    m_wlast   = s_axi_wlast;
    wire                    m_wvalid  = s_axi_wvalid && !bench_en;
    wire                    m_wready;
    wire [ID_WIDTH-1:0]     m_bid;
    wire [1:0]              m_bresp;
    wire                    m_bvalid;
    wire                    m_bready  = bench_en ? 1'b1 : s_axi_bready;
    wire [ID_WIDTH-1:0]     m_arid    = bench_en ? bench_k[ID_WIDTH-1:0] : s_axi_arid;
    wire [ADDR_WIDTH-1:0]   m_araddr  = bench_en ? b_araddr : s_axi_araddr;
    wire [7:0]              m_arlen   = bench_en ? bench_len : s_axi_arlen;
    wire [2:0]              m_arsize  = bench_en ? FULL_SIZE : s_axi_arsize;
    wire [1:0]              m_arburst = bench_en ? 2'b01 : s_axi_arburst;
    wire                    m_arvalid = bench_en ? b_arvalid : s_axi_arvalid;
    wire                    m_arready;
    wire [ID_WIDTH-1:0]     m_rid;
    wire [DATA_WIDTH-1:0]   m_rdata;
    wire [1:0]              m_rresp;
    wire                    m_rlast;
    wire                    m_rvalid;
    wire                    m_rready  = bench_en ? 1'b1 : s_axi_rready;

    assign s_axi_awready = m_awready && !bench_en;
    assign s_axi_wready  = m_wready  && !bench_en;
    assign s_axi_bid     = m_bid;
    assign s_axi_bresp   = m_bresp;
    assign s_axi_bvalid  = m_bvalid  && !bench_en;
    assign s_axi_arready = m_arready && !bench_en;
    assign s_axi_rid     = m_rid;
    assign s_axi_rdata   = m_rdata;
    assign s_axi_rresp   = m_rresp;
    assign s_axi_rlast   = m_rlast;
    assign s_axi_rvalid  = m_rvalid  && !bench_en;

    axi_mem #(
        .DATA_WIDTH(DATA_WIDTH), .ADDR_WIDTH(ADDR_WIDTH), .ID_WIDTH(ID_WIDTH),
        .MAX_READS(MAX_READS), .MAX_WRITES(MAX_WRITES)
    ) mem (
        .clk(clk), .rst(rst),
        .s_axi_awid(m_awid), .s_axi_awaddr(m_awaddr), .s_axi_awlen(m_awlen), .s_axi_awsize(m_awsize),
        .s_axi_awburst(m_awburst), .s_axi_awvalid(m_awvalid), .s_axi_awready(m_awready),
        .s_axi_wdata(m_wdata), .s_axi_wstrb(m_wstrb), .s_axi_wlast(m_wlast), .s_axi_wvalid(m_wvalid),
        .s_axi_wready(m_wready),
        .s_axi_bid(m_bid), .s_axi_bresp(m_bresp), .s_axi_bvalid(m_bvalid), .s_axi_bready(m_bready),
        .s_axi_arid(m_arid), .s_axi_araddr(m_araddr), .s_axi_arlen(m_arlen), .s_axi_arsize(m_arsize),
        .s_axi_arburst(m_arburst), .s_axi_arvalid(m_arvalid), .s_axi_arready(m_arready),
        .s_axi_rid(m_rid), .s_axi_rdata(m_rdata), .s_axi_rresp(m_rresp), .s_axi_rlast(m_rlast),
        .s_axi_rvalid(m_rvalid), .s_axi_rready(m_rready),
        .cfg_rd_latency(cfg_rd_latency), .cfg_wr_latency(cfg_wr_latency),
        .cfg_stall_aw(cfg_stall_aw), .cfg_stall_w(cfg_stall_w), .cfg_stall_b(cfg_stall_b),
        .cfg_stall_ar(cfg_stall_ar), .cfg_stall_r(cfg_stall_r), .cfg_seed(cfg_seed),
        .cfg_err_base(cfg_err_base), .cfg_err_limit(cfg_err_limit), .cfg_err_resp(cfg_err_resp)
    );

    axi_checker #(
        .DATA_WIDTH(DATA_WIDTH), .ADDR_WIDTH(ADDR_WIDTH), .ID_WIDTH(ID_WIDTH),
        .MAX_READS(MAX_READS), .MAX_WRITES(MAX_WRITES)
    ) chk (
        .clk(clk), .rst(rst),
        .axi_awid(m_awid), .axi_awaddr(m_awaddr), .axi_awlen(m_awlen), .axi_awsize(m_awsize),
        .axi_awburst(m_awburst), .axi_awvalid(m_awvalid), .axi_awready(m_awready),
        .axi_wdata(m_wdata), .axi_wstrb(m_wstrb), .axi_wlast(m_wlast), .axi_wvalid(m_wvalid),
        .axi_wready(m_wready),
        .axi_bid(m_bid), .axi_bresp(m_bresp), .axi_bvalid(m_bvalid), .axi_bready(m_bready),
        .axi_arid(m_arid), .axi_araddr(m_araddr), .axi_arlen(m_arlen), .axi_arsize(m_arsize),
        .axi_arburst(m_arburst), .axi_arvalid(m_arvalid), .axi_arready(m_arready),
        .axi_rid(m_rid), .axi_rdata(m_rdata), .axi_rresp(m_rresp), .axi_rlast(m_rlast),
        .axi_rvalid(m_rvalid), .axi_rready(m_rready),
        .chk_error(chk_error), .chk_code(chk_code), .chk_addr(chk_addr),
        .chk_arg0(chk_arg0), .chk_arg1(chk_arg1), .chk_arg2(chk_arg2)
    );

    // ---------------------------------------------------------------- bench bookkeeping
    function [31:0] word_sum(input [DATA_WIDTH-1:0] data);
        integer i;
        begin
            word_sum = 32'd0;
            for (i = 0; i < DATA_WIDTH / 32; i = i + 1)
                word_sum = word_sum + data[32*i +: 32];
        end
    endfunction

    always @(posedge clk) begin
        if (rst) begin
            bench_en_q   <= 1'b0;
            bench_seen   <= 1'b0;
            bench_k      <= 32'd0;
            bench_done   <= 1'b0;
            bench_beats  <= 32'd0;
            bench_cycles <= 32'd0;
            bench_sum    <= 32'd0;
        end else begin
            bench_en_q <= bench_en;
            if (bench_en && !bench_en_q) begin
                bench_seen   <= 1'b0;
                bench_k      <= 32'd0;
                bench_done   <= 1'b0;
                bench_beats  <= 32'd0;
                bench_cycles <= 32'd0;
                bench_sum    <= 32'd0;
            end else if (bench_en) begin
                if (m_arvalid && m_arready)
                    bench_k <= bench_k + 32'd1;
                if (m_rvalid) begin
                    bench_seen  <= 1'b1;
                    bench_beats <= bench_beats + 32'd1;
                    bench_sum   <= bench_sum + word_sum(m_rdata);
                    if (bench_beats + 32'd1 == bench_total)
                        bench_done <= 1'b1;
                end
                if (!bench_done && (bench_seen || m_rvalid))
                    bench_cycles <= bench_cycles + 32'd1;
            end
        end
    end

endmodule

`default_nettype wire
