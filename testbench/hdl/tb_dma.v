// tb_dma: two DMA engines behind an AXI4 mux (Amaranth `dma_bench`, testbench/dma_design.py)
// on the shared-file memory model, with the protocol checker on the shared port.
// cocotb (tests/cocotb_dma.py) drives the engines' command inputs, sets the memory
// model's cfg_* inputs and reads the per-engine bookkeeping counters; bus_w_beats /
// bus_r_beats count W / R handshakes on the shared port.
`default_nettype none

module tb_dma #(
    parameter DATA_WIDTH = 64,
    parameter ADDR_WIDTH = 48,
    parameter ID_WIDTH   = 4
) (
    input  wire                  clk,
    input  wire                  rst,
    // engine 0
    input  wire                  d0_cmd_valid,
    input  wire [47:0]           d0_cmd_src,
    input  wire [47:0]           d0_cmd_dst,
    input  wire [20:0]           d0_cmd_bytes,
    input  wire                  d0_cmd_fill,
    input  wire                  d0_cmd_raw_wait,
    input  wire                  d0_abort,
    output wire                  d0_cmd_ready,
    output wire                  d0_busy,
    output wire [31:0]           d0_accepted,
    output wire [31:0]           d0_completed,
    output wire [31:0]           d0_errors,
    output wire [1:0]            d0_last_resp,
    output wire [47:0]           d0_last_err_addr,
    output wire [31:0]           d0_accept_cycle,
    output wire [31:0]           d0_done_cycle,
    output wire [31:0]           d0_rd_bytes,
    output wire [31:0]           d0_wr_bytes,
    output wire [31:0]           d0_busy_cycles,
    // engine 1
    input  wire                  d1_cmd_valid,
    input  wire [47:0]           d1_cmd_src,
    input  wire [47:0]           d1_cmd_dst,
    input  wire [20:0]           d1_cmd_bytes,
    input  wire                  d1_cmd_fill,
    input  wire                  d1_cmd_raw_wait,
    input  wire                  d1_abort,
    output wire                  d1_cmd_ready,
    output wire                  d1_busy,
    output wire [31:0]           d1_accepted,
    output wire [31:0]           d1_completed,
    output wire [31:0]           d1_errors,
    output wire [1:0]            d1_last_resp,
    output wire [47:0]           d1_last_err_addr,
    output wire [31:0]           d1_accept_cycle,
    output wire [31:0]           d1_done_cycle,
    output wire [31:0]           d1_rd_bytes,
    output wire [31:0]           d1_wr_bytes,
    output wire [31:0]           d1_busy_cycles,
    output wire [31:0]           cycle,
    output reg  [31:0]           bus_w_beats,
    output reg  [31:0]           bus_r_beats,
    // memory model settings
    input  wire [15:0]           cfg_rd_latency,
    input  wire [15:0]           cfg_wr_latency,
    input  wire [7:0]            cfg_stall_aw,
    input  wire [7:0]            cfg_stall_w,
    input  wire [7:0]            cfg_stall_b,
    input  wire [7:0]            cfg_stall_ar,
    input  wire [7:0]            cfg_stall_r,
    input  wire [31:0]           cfg_seed,
    input  wire [47:0]           cfg_err_base,
    input  wire [47:0]           cfg_err_limit,
    input  wire [1:0]            cfg_err_resp,
    // protocol checker verdict
    output wire                  chk_error,
    output wire [7:0]            chk_code,
    output wire [47:0]           chk_addr,
    output wire [31:0]           chk_arg0,
    output wire [31:0]           chk_arg1,
    output wire [31:0]           chk_arg2
);
    wire [ID_WIDTH-1:0]     awid;
    wire [ADDR_WIDTH-1:0]   awaddr;
    wire [7:0]              awlen;
    wire [2:0]              awsize;
    wire [1:0]              awburst;
    wire                    awvalid, awready;
    wire [DATA_WIDTH-1:0]   wdata;
    wire [DATA_WIDTH/8-1:0] wstrb;
    wire                    wlast, wvalid, wready;
    wire [ID_WIDTH-1:0]     bid;
    wire [1:0]              bresp;
    wire                    bvalid, bready;
    wire [ID_WIDTH-1:0]     arid;
    wire [ADDR_WIDTH-1:0]   araddr;
    wire [7:0]              arlen;
    wire [2:0]              arsize;
    wire [1:0]              arburst;
    wire                    arvalid, arready;
    wire [ID_WIDTH-1:0]     rid;
    wire [DATA_WIDTH-1:0]   rdata;
    wire [1:0]              rresp;
    wire                    rlast, rvalid, rready;

    dma_bench dut (
        .clk(clk), .rst(rst), .cycle(cycle),
        .d0_cmd_valid(d0_cmd_valid), .d0_cmd_src(d0_cmd_src), .d0_cmd_dst(d0_cmd_dst),
        .d0_cmd_bytes(d0_cmd_bytes), .d0_cmd_fill(d0_cmd_fill), .d0_cmd_raw_wait(d0_cmd_raw_wait),
        .d0_abort(d0_abort),        .d0_cmd_ready(d0_cmd_ready), .d0_busy(d0_busy), .d0_accepted(d0_accepted),
        .d0_completed(d0_completed), .d0_errors(d0_errors), .d0_last_resp(d0_last_resp),
        .d0_last_err_addr(d0_last_err_addr), .d0_accept_cycle(d0_accept_cycle),
        .d0_done_cycle(d0_done_cycle), .d0_rd_bytes(d0_rd_bytes), .d0_wr_bytes(d0_wr_bytes),
        .d0_busy_cycles(d0_busy_cycles), .d1_cmd_valid(d1_cmd_valid), .d1_cmd_src(d1_cmd_src),
        .d1_cmd_dst(d1_cmd_dst), .d1_cmd_bytes(d1_cmd_bytes), .d1_cmd_fill(d1_cmd_fill),
        .d1_cmd_raw_wait(d1_cmd_raw_wait), .d1_abort(d1_abort), .d1_cmd_ready(d1_cmd_ready), .d1_busy(d1_busy),
        .d1_accepted(d1_accepted), .d1_completed(d1_completed), .d1_errors(d1_errors),
        .d1_last_resp(d1_last_resp), .d1_last_err_addr(d1_last_err_addr),
        .d1_accept_cycle(d1_accept_cycle), .d1_done_cycle(d1_done_cycle), .d1_rd_bytes(d1_rd_bytes),
        .d1_wr_bytes(d1_wr_bytes), .d1_busy_cycles(d1_busy_cycles),
        .m_axi__awid(awid), .m_axi__awaddr(awaddr), .m_axi__awlen(awlen), .m_axi__awsize(awsize),
        .m_axi__awburst(awburst), .m_axi__awvalid(awvalid), .m_axi__awready(awready),
        .m_axi__wdata(wdata), .m_axi__wstrb(wstrb), .m_axi__wlast(wlast), .m_axi__wvalid(wvalid),
        .m_axi__wready(wready), .m_axi__bid(bid), .m_axi__bresp(bresp), .m_axi__bvalid(bvalid),
        .m_axi__bready(bready), .m_axi__arid(arid), .m_axi__araddr(araddr), .m_axi__arlen(arlen),
        .m_axi__arsize(arsize), .m_axi__arburst(arburst), .m_axi__arvalid(arvalid),
        .m_axi__arready(arready), .m_axi__rid(rid), .m_axi__rdata(rdata), .m_axi__rresp(rresp),
        .m_axi__rlast(rlast), .m_axi__rvalid(rvalid), .m_axi__rready(rready)
    );

    axi_mem #(.DATA_WIDTH(DATA_WIDTH), .ADDR_WIDTH(ADDR_WIDTH), .ID_WIDTH(ID_WIDTH)) mem (
        .clk(clk), .rst(rst),
        .s_axi_awid(awid), .s_axi_awaddr(awaddr), .s_axi_awlen(awlen), .s_axi_awsize(awsize),
        .s_axi_awburst(awburst), .s_axi_awvalid(awvalid), .s_axi_awready(awready),
        .s_axi_wdata(wdata), .s_axi_wstrb(wstrb), .s_axi_wlast(wlast), .s_axi_wvalid(wvalid),
        .s_axi_wready(wready), .s_axi_bid(bid), .s_axi_bresp(bresp), .s_axi_bvalid(bvalid),
        .s_axi_bready(bready), .s_axi_arid(arid), .s_axi_araddr(araddr), .s_axi_arlen(arlen),
        .s_axi_arsize(arsize), .s_axi_arburst(arburst), .s_axi_arvalid(arvalid),
        .s_axi_arready(arready), .s_axi_rid(rid), .s_axi_rdata(rdata), .s_axi_rresp(rresp),
        .s_axi_rlast(rlast), .s_axi_rvalid(rvalid), .s_axi_rready(rready),
        .cfg_rd_latency(cfg_rd_latency), .cfg_wr_latency(cfg_wr_latency),
        .cfg_stall_aw(cfg_stall_aw), .cfg_stall_w(cfg_stall_w), .cfg_stall_b(cfg_stall_b),
        .cfg_stall_ar(cfg_stall_ar), .cfg_stall_r(cfg_stall_r), .cfg_seed(cfg_seed),
        .cfg_err_base(cfg_err_base), .cfg_err_limit(cfg_err_limit), .cfg_err_resp(cfg_err_resp)
    );

    axi_checker #(.DATA_WIDTH(DATA_WIDTH), .ADDR_WIDTH(ADDR_WIDTH), .ID_WIDTH(ID_WIDTH)) chk (
        .clk(clk), .rst(rst),
        .axi_awid(awid), .axi_awaddr(awaddr), .axi_awlen(awlen), .axi_awsize(awsize),
        .axi_awburst(awburst), .axi_awvalid(awvalid), .axi_awready(awready), .axi_wdata(wdata),
        .axi_wstrb(wstrb), .axi_wlast(wlast), .axi_wvalid(wvalid), .axi_wready(wready),
        .axi_bid(bid), .axi_bresp(bresp), .axi_bvalid(bvalid), .axi_bready(bready), .axi_arid(arid),
        .axi_araddr(araddr), .axi_arlen(arlen), .axi_arsize(arsize), .axi_arburst(arburst),
        .axi_arvalid(arvalid), .axi_arready(arready), .axi_rid(rid), .axi_rdata(rdata),
        .axi_rresp(rresp), .axi_rlast(rlast), .axi_rvalid(rvalid), .axi_rready(rready),
        .chk_error(chk_error), .chk_code(chk_code), .chk_addr(chk_addr),
        .chk_arg0(chk_arg0), .chk_arg1(chk_arg1), .chk_arg2(chk_arg2)
    );

    always @(posedge clk) begin
        if (rst) begin
            bus_w_beats <= 32'd0;
            bus_r_beats <= 32'd0;
        end else begin
            bus_w_beats <= bus_w_beats + {31'd0, wvalid & wready};
            bus_r_beats <= bus_r_beats + {31'd0, rvalid & rready};
        end
    end
endmodule

`default_nettype wire
