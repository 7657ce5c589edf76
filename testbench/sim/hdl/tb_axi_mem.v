// tb_axi_mem: axi_mem and axi_checker on one AXI4 bus, for tests/rtl/cocotb_axi_mem.py.
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
    parameter ID_WIDTH   = 4
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

    input  wire                    bench_en,
    input  wire [ADDR_WIDTH-1:0]   bench_addr,
    input  wire [31:0]             bench_mask,     // burst offsets wrap with this mask
    input  wire [31:0]             bench_bursts,
    input  wire [7:0]              bench_len,
    output reg                     bench_done,
    output reg  [31:0]             bench_beats,
    output reg  [31:0]             bench_cycles,
    output reg  [31:0]             bench_sum,

    `include "tb_mem_ports.vh"
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
    wire [ID_WIDTH-1:0]     awid    = s_axi_awid;
    wire [ADDR_WIDTH-1:0]   awaddr  = s_axi_awaddr;
    wire [7:0]              awlen   = s_axi_awlen;
    wire [2:0]              awsize  = s_axi_awsize;
    wire [1:0]              awburst = s_axi_awburst;
    wire                    awvalid = s_axi_awvalid && !bench_en;
    wire                    awready;
    wire [DATA_WIDTH-1:0]   wdata   = s_axi_wdata;
    wire [DATA_WIDTH/8-1:0] wstrb   = s_axi_wstrb;
    wire                    wlast   = s_axi_wlast;
    wire                    wvalid  = s_axi_wvalid && !bench_en;
    wire                    wready;
    wire [ID_WIDTH-1:0]     bid;
    wire [1:0]              bresp;
    wire                    bvalid;
    wire                    bready  = bench_en ? 1'b1 : s_axi_bready;
    wire [ID_WIDTH-1:0]     arid    = bench_en ? bench_k[ID_WIDTH-1:0] : s_axi_arid;
    wire [ADDR_WIDTH-1:0]   araddr  = bench_en ? b_araddr : s_axi_araddr;
    wire [7:0]              arlen   = bench_en ? bench_len : s_axi_arlen;
    wire [2:0]              arsize  = bench_en ? FULL_SIZE : s_axi_arsize;
    wire [1:0]              arburst = bench_en ? 2'b01 : s_axi_arburst;
    wire                    arvalid = bench_en ? b_arvalid : s_axi_arvalid;
    wire                    arready;
    wire [ID_WIDTH-1:0]     rid;
    wire [DATA_WIDTH-1:0]   rdata;
    wire [1:0]              rresp;
    wire                    rlast;
    wire                    rvalid;
    wire                    rready  = bench_en ? 1'b1 : s_axi_rready;

    assign s_axi_awready = awready && !bench_en;
    assign s_axi_wready  = wready  && !bench_en;
    assign s_axi_bid     = bid;
    assign s_axi_bresp   = bresp;
    assign s_axi_bvalid  = bvalid  && !bench_en;
    assign s_axi_arready = arready && !bench_en;
    assign s_axi_rid     = rid;
    assign s_axi_rdata   = rdata;
    assign s_axi_rresp   = rresp;
    assign s_axi_rlast   = rlast;
    assign s_axi_rvalid  = rvalid  && !bench_en;

    wire mem_rst = rst;
    `include "tb_mem_checker.vh"

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
                if (arvalid && arready)
                    bench_k <= bench_k + 32'd1;
                if (rvalid) begin
                    bench_seen  <= 1'b1;
                    bench_beats <= bench_beats + 32'd1;
                    bench_sum   <= bench_sum + word_sum(rdata);
                    if (bench_beats + 32'd1 == bench_total)
                        bench_done <= 1'b1;
                end
                if (!bench_done && (bench_seen || rvalid))
                    bench_cycles <= bench_cycles + 32'd1;
            end
        end
    end

endmodule

`default_nettype wire
