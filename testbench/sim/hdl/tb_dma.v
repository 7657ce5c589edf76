// tb_dma: two DMA engines behind an AXI4 mux (Amaranth `dma_bench`, testbench/sim/dma_design.py)
// on the shared-file memory model, with the protocol checker on the shared port.
// cocotb (tests/rtl/cocotb_dma.py) drives the engines' command inputs, sets the memory
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
    `include "tb_mem_ports.vh"
);
    `include "tb_axi_bus.vh"

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

    wire mem_rst = rst;
    `include "tb_mem_checker.vh"

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
