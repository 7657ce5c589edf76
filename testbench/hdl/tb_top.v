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

    axi_mem #(.DATA_WIDTH(DATA_WIDTH), .ADDR_WIDTH(ADDR_WIDTH), .ID_WIDTH(ID_WIDTH)) mem (
        .clk(clk), .rst(rst),
        .s_axi_awid(awid), .s_axi_awaddr(awaddr), .s_axi_awlen(awlen), .s_axi_awsize(awsize),
        .s_axi_awburst(awburst), .s_axi_awvalid(awvalid), .s_axi_awready(awready),
        .s_axi_wdata(wdata), .s_axi_wstrb(wstrb), .s_axi_wlast(wlast), .s_axi_wvalid(wvalid),
        .s_axi_wready(wready),
        .s_axi_bid(bid), .s_axi_bresp(bresp), .s_axi_bvalid(bvalid), .s_axi_bready(bready),
        .s_axi_arid(arid), .s_axi_araddr(araddr), .s_axi_arlen(arlen), .s_axi_arsize(arsize),
        .s_axi_arburst(arburst), .s_axi_arvalid(arvalid), .s_axi_arready(arready),
        .s_axi_rid(rid), .s_axi_rdata(rdata), .s_axi_rresp(rresp), .s_axi_rlast(rlast),
        .s_axi_rvalid(rvalid), .s_axi_rready(rready),
        .cfg_rd_latency(cfg_rd_latency), .cfg_wr_latency(cfg_wr_latency),
        .cfg_stall_aw(cfg_stall_aw), .cfg_stall_w(cfg_stall_w), .cfg_stall_b(cfg_stall_b),
        .cfg_stall_ar(cfg_stall_ar), .cfg_stall_r(cfg_stall_r), .cfg_seed(cfg_seed),
        .cfg_err_base(cfg_err_base), .cfg_err_limit(cfg_err_limit), .cfg_err_resp(cfg_err_resp)
    );

    axi_checker #(.DATA_WIDTH(DATA_WIDTH), .ADDR_WIDTH(ADDR_WIDTH), .ID_WIDTH(ID_WIDTH)) chk (
        .clk(clk), .rst(rst),
        .axi_awid(awid), .axi_awaddr(awaddr), .axi_awlen(awlen), .axi_awsize(awsize),
        .axi_awburst(awburst), .axi_awvalid(awvalid), .axi_awready(awready),
        .axi_wdata(wdata), .axi_wstrb(wstrb), .axi_wlast(wlast), .axi_wvalid(wvalid),
        .axi_wready(wready),
        .axi_bid(bid), .axi_bresp(bresp), .axi_bvalid(bvalid), .axi_bready(bready),
        .axi_arid(arid), .axi_araddr(araddr), .axi_arlen(arlen), .axi_arsize(arsize),
        .axi_arburst(arburst), .axi_arvalid(arvalid), .axi_arready(arready),
        .axi_rid(rid), .axi_rdata(rdata), .axi_rresp(rresp), .axi_rlast(rlast),
        .axi_rvalid(rvalid), .axi_rready(rready),
        .chk_error(chk_error), .chk_code(chk_code), .chk_addr(chk_addr),
        .chk_arg0(chk_arg0), .chk_arg1(chk_arg1), .chk_arg2(chk_arg2)
    );
endmodule

`default_nettype wire
