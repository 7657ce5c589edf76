// mmio_master: the AXI4-Lite master that performs the driver's MMIO when the clock lives
// in HDL (tb_top with GPUCOSIM_HDL_CLOCK; testbench/sim/cocotb_device.py drives it).
//
// Python asks with one write per access: `cmd` = {req, we, wstrb[3:0], addr[15:0],
// wdata[31:0]}, where `req` toggles once per access. The transaction then runs here, edge
// by edge, and Python is woken once, when the slave's response becomes valid
// (`resp_valid`), to read `resp` = {BRESP or RRESP, RDATA} at the handshake edge. Before
// this, cocotbext-axi's AxiLiteMaster ran each transaction from Python on every edge.
//
// The timing is cocotbext-axi's, cycle for cycle, so every cycle figure stays the same:
// - AW+W (a write) or AR (a read) go valid after the first rising edge that sees the
//   request, each dropping after its own handshake;
// - BREADY and RREADY are high from the first edge after reset is released;
// - one access at a time (the driver waits for each), so no ID or ordering logic.
`default_nettype none

module mmio_master (
    input  wire        clk,
    input  wire        rst,
    // from and to Python
    input  wire [53:0] cmd,
    output wire        resp_valid,  // the slave's B or R is valid: handshaken at the next edge
    output wire [33:0] resp,
    // AXI4-Lite master
    output reg  [15:0] awaddr,
    output reg         awvalid,
    input  wire        awready,
    output reg  [31:0] axi_wdata,
    output reg  [3:0]  axi_wstrb,
    output reg         wvalid,
    input  wire        wready,
    input  wire        bvalid,
    input  wire [1:0]  bresp,
    output reg         bready,
    output reg  [15:0] araddr,
    output reg         arvalid,
    input  wire        arready,
    input  wire        rvalid,
    input  wire [1:0]  rresp,
    input  wire [31:0] rdata,
    output reg         rready
);
    reg seen;  // the last request taken

    wire        req   = cmd[53];
    wire        we    = cmd[52];
    wire [3:0]  wstrb = cmd[51:48];
    wire [15:0] addr  = cmd[47:32];
    wire [31:0] wdata = cmd[31:0];

    assign resp_valid = (bvalid && bready) || (rvalid && rready);
    assign resp       = bvalid ? {bresp, 32'd0} : {rresp, rdata};

    initial begin
        seen = 1'b0;
        awaddr = 16'd0; awvalid = 1'b0; axi_wdata = 32'd0; axi_wstrb = 4'd0; wvalid = 1'b0;
        bready = 1'b0; araddr = 16'd0; arvalid = 1'b0; rready = 1'b0;
    end

    // No request waiting, no channel valid, both READYs up: the body below would change
    // nothing (a net: a quiet cycle costs Icarus one test, not the body's reads).
    wire quiet = req == seen && !awvalid && !wvalid && !arvalid && bready && rready;

    always @(posedge clk) begin
        if (rst) begin
            awvalid <= 1'b0;
            wvalid  <= 1'b0;
            arvalid <= 1'b0;
            bready  <= 1'b0;
            rready  <= 1'b0;
            seen    <= req;  // a request made in reset is dropped, as cocotbext-axi flushes it
        end else if (!quiet) begin
            bready <= 1'b1;
            rready <= 1'b1;
            if (awvalid && awready) awvalid <= 1'b0;
            if (wvalid && wready)   wvalid  <= 1'b0;
            if (arvalid && arready) arvalid <= 1'b0;
            if (req != seen) begin
                seen <= req;
                if (we) begin
                    awaddr    <= addr;
                    awvalid   <= 1'b1;
                    axi_wdata <= wdata;
                    axi_wstrb <= wstrb;
                    wvalid    <= 1'b1;
                end else begin
                    araddr    <= addr;
                    arvalid   <= 1'b1;
                end
            end
        end
    end
endmodule

`default_nettype wire
