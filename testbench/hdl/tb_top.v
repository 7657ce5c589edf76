// Testbench toplevel: the GPU front end (Amaranth-generated gpu_top) with its memory
// master on the shared-file memory model and a protocol checker watching that port.
// cocotb drives s_axil_* (MMIO) with cocotbext-axi, watches irq, sets the memory
// model's cfg_* inputs and fails a test when chk_error rises.
`default_nettype none

module tb_top #(
    parameter DATA_WIDTH = 64,
    parameter ADDR_WIDTH = 48,
    parameter ID_WIDTH   = 4
) (
    input  wire                  clk,
    input  wire                  rst,
    // MMIO: AXI4-Lite slave
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
    output wire                  irq,
    `include "tb_mem_ports.vh"
);
    `include "tb_axi_bus.vh"

    gpu_top gpu (
        .clk(clk), .rst(rst),
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
