// Testbench toplevel: the GPU front end (Amaranth-generated gpu_top) with its memory
// master on the shared-file memory model and a protocol checker watching that port.
// cocotb drives s_axil_* (MMIO) with cocotbext-axi, watches irq, sets the memory
// model's cfg_* inputs and fails a test when chk_error rises.
//
// The clock: with GPUCOSIM_HDL_CLOCK defined (to the half period in ns; testbench/sim/__init__.py
// does that by default) it is generated here and MMIO runs in mmio_master.v, so no Python
// or VPI callback runs per edge: Python is woken only by the events it waits for. Without
// it `clk` is an input that cocotb drives and cocotbext-axi drives s_axil_* (the path
// before issue 13, kept as GPUCOSIM_CLOCK=cocotb to measure against).
`default_nettype none

module tb_top #(
    parameter DATA_WIDTH = 64,
    parameter ADDR_WIDTH = 48,
    parameter ID_WIDTH   = 4
) (
`ifdef GPUCOSIM_HDL_CLOCK
    // MMIO requests for mmio_master (testbench/sim/cocotb_device.py)
    input  wire [53:0]           mmio_cmd,
    output wire                  mmio_resp_valid,
    output wire [33:0]           mmio_resp,
`else
    input  wire                  clk,
`endif
    input  wire                  rst,
`ifndef GPUCOSIM_HDL_CLOCK
    // MMIO: AXI4-Lite slave, driven by cocotbext-axi
    input  wire [15:0]           s_axil_awaddr,
    input  wire                  s_axil_awvalid,
    output wire                  s_axil_awready,
    input  wire [31:0]           s_axil_wdata,
    input  wire [3:0]            s_axil_wstrb,
    input  wire                  s_axil_wvalid,
    output wire                  s_axil_wready,
    output wire [1:0]            s_axil_bresp,
    output wire                  s_axil_bvalid,
    input  wire                  s_axil_bready,
    input  wire [15:0]           s_axil_araddr,
    input  wire                  s_axil_arvalid,
    output wire                  s_axil_arready,
    output wire [31:0]           s_axil_rdata,
    output wire [1:0]            s_axil_rresp,
    output wire                  s_axil_rvalid,
    input  wire                  s_axil_rready,
`endif
    output wire                  irq,
    `include "tb_mem_ports.vh"
);
`ifdef GPUCOSIM_HDL_CLOCK
    // High at time 0 with a rising edge there, as cocotb's Clock(start_high=True) drives it.
    reg clk = 1'b0;
    initial begin
        #0 clk = 1'b1;
        forever #(`GPUCOSIM_HDL_CLOCK) clk = ~clk;
    end
`endif
`ifdef GPUCOSIM_RST_REG
    // Each time the model is evaluated (twice per cycle), Verilator's generated code
    // evaluates again every combinational cone that reads a top-level input (its "ico"
    // region), and every register's next-state logic reads the reset. So the design gets
    // the reset through a register, loaded when `rst` changes: Python writes `rst` after a
    // rising edge has been evaluated, so the design sees the new value at the next rising
    // edge, as it did when it read the input directly. Loaded on `rst`'s own edges, not on
    // the clock's falling edge: Verilator re-runs the design's whole combinational logic
    // after every event its inputs depend on, so a falling-edge register made it run twice
    // per cycle (13% of the CPU time; docs/architecture.md). (testbench/sim/__init__.py defines this
    // on Verilator's fast build.)
    reg dut_rst = 1'b1;
    always @(posedge rst or negedge rst) dut_rst <= rst;
`else
    wire dut_rst = rst;
`endif
    wire mem_rst = dut_rst;
`ifdef GPUCOSIM_HDL_CLOCK

    // The MMIO port, driven by mmio_master; same names as the ports cocotbext-axi drives.
    wire [15:0] s_axil_awaddr, s_axil_araddr;
    wire [31:0] s_axil_wdata, s_axil_rdata;
    wire [3:0]  s_axil_wstrb;
    wire [1:0]  s_axil_bresp, s_axil_rresp;
    wire        s_axil_awvalid, s_axil_awready, s_axil_wvalid, s_axil_wready, s_axil_bvalid, s_axil_bready;
    wire        s_axil_arvalid, s_axil_arready, s_axil_rvalid, s_axil_rready;

    mmio_master mmio (
        .clk(clk), .rst(dut_rst),
        .cmd(mmio_cmd), .resp_valid(mmio_resp_valid), .resp(mmio_resp),
        .awaddr(s_axil_awaddr), .awvalid(s_axil_awvalid), .awready(s_axil_awready),
        .axi_wdata(s_axil_wdata), .axi_wstrb(s_axil_wstrb), .wvalid(s_axil_wvalid), .wready(s_axil_wready),
        .bvalid(s_axil_bvalid), .bresp(s_axil_bresp), .bready(s_axil_bready),
        .araddr(s_axil_araddr), .arvalid(s_axil_arvalid), .arready(s_axil_arready),
        .rvalid(s_axil_rvalid), .rresp(s_axil_rresp), .rdata(s_axil_rdata), .rready(s_axil_rready)
    );
`endif
    `include "tb_axi_bus.vh"

    gpu_top gpu (
        .clk(clk), .rst(dut_rst),
        .s_axil__awaddr(s_axil_awaddr), .s_axil__awvalid(s_axil_awvalid), .s_axil__awready(s_axil_awready),
        .s_axil__wdata(s_axil_wdata), .s_axil__wstrb(s_axil_wstrb), .s_axil__wvalid(s_axil_wvalid),
        .s_axil__wready(s_axil_wready),
        .s_axil__bresp(s_axil_bresp), .s_axil__bvalid(s_axil_bvalid), .s_axil__bready(s_axil_bready),
        .s_axil__araddr(s_axil_araddr), .s_axil__arvalid(s_axil_arvalid), .s_axil__arready(s_axil_arready),
        .s_axil__rdata(s_axil_rdata), .s_axil__rresp(s_axil_rresp), .s_axil__rvalid(s_axil_rvalid),
        .s_axil__rready(s_axil_rready),
        .m_axi__awid(awid), .m_axi__awaddr(awaddr), .m_axi__awlen(awlen), .m_axi__awsize(awsize),
        .m_axi__awburst(awburst), .m_axi__awvalid(awvalid), .m_axi__awready(awready),
        .m_axi__wdata(wdata), .m_axi__wstrb(wstrb), .m_axi__wlast(wlast), .m_axi__wvalid(wvalid),
        .m_axi__wready(wready),
        .m_axi__bid(bid), .m_axi__bresp(bresp), .m_axi__bvalid(bvalid), .m_axi__bready(bready),
        .m_axi__arid(arid), .m_axi__araddr(araddr), .m_axi__arlen(arlen), .m_axi__arsize(arsize),
        .m_axi__arburst(arburst), .m_axi__arvalid(arvalid), .m_axi__arready(arready),
        .m_axi__rid(rid), .m_axi__rdata(rdata), .m_axi__rresp(rresp), .m_axi__rlast(rlast),
        .m_axi__rvalid(rvalid), .m_axi__rready(rready),
        .irq(irq)
    );

    `include "tb_mem_checker.vh"
endmodule

`default_nettype wire
