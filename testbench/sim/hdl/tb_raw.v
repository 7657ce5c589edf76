// tb_raw: the raw baseline of `make bench` (testbench/bench/raw.py). The same tb_top
// (gpu_top, the shared-file memory model, the AXI checker, the HDL clock and
// mmio_master), driven by an HDL stimulus instead of cocotb: no Python, no VPI, no
// public signals. It runs the same work as the co-simulation measures, so the two speeds
// compare side by side.
//
// The work is a script of 32-bit words read with $readmemh from +script=FILE:
//   1 ADDR DATA  MMIO write (through mmio_master, as the co-simulation does)
//   2            wait for irq
//   3 N          let N cycles pass
//   4            mark: prints the cycle; on Verilator also appends the wall clock (ns)
//                to +times=FILE (Icarus has no $system: raw_bench.py times the process)
//   0            end
// It prints `cycle N` at each timestamp and `raw: done` at the end.
`default_nettype none

module tb_raw #(
    parameter DATA_WIDTH = 64,
    parameter SCRIPT_WORDS = 4096
);
    localparam ADDR_WIDTH = 48;

    reg         rst = 1'b1;
    reg  [53:0] cmd = 54'd0;
    wire        resp_valid;
    wire [33:0] resp;
    wire        irq;
    wire        chk_error;
    wire [7:0]  chk_code;
    /* verilator lint_off UNUSEDSIGNAL */
    wire [ADDR_WIDTH-1:0] chk_addr;
    wire [31:0] chk_arg0, chk_arg1, chk_arg2;
    /* verilator lint_on UNUSEDSIGNAL */

    tb_top #(.DATA_WIDTH(DATA_WIDTH)) dut (
        .mmio_cmd(cmd), .mmio_resp_valid(resp_valid), .mmio_resp(resp),
        .rst(rst), .irq(irq),
        .cfg_rd_latency(16'd0), .cfg_wr_latency(16'd0),
        .cfg_stall_aw(8'd0), .cfg_stall_w(8'd0), .cfg_stall_b(8'd0), .cfg_stall_ar(8'd0), .cfg_stall_r(8'd0),
        .cfg_seed(32'd1), .cfg_err_base({ADDR_WIDTH{1'b0}}), .cfg_err_limit({ADDR_WIDTH{1'b0}}),
        .cfg_err_resp(2'd0),
        .chk_error(chk_error), .chk_code(chk_code), .chk_addr(chk_addr),
        .chk_arg0(chk_arg0), .chk_arg1(chk_arg1), .chk_arg2(chk_arg2)
    );

    reg [31:0]   script [0:SCRIPT_WORDS-1];
    reg [8*512-1:0] script_file, times_file, shell;
    integer      pc;

    task mmio_write(input [15:0] addr, input [31:0] data);
        begin
            cmd = {~cmd[53], 1'b1, 4'hf, addr, data};
            @(negedge dut.clk);  // the earliest a response can come: not the last one's
            while (!resp_valid) @(negedge dut.clk);
            @(posedge dut.clk);
            if (resp[33:32] != 2'd0) begin
                $display("raw: MMIO write at 0x%04h answered %0d", addr, resp[33:32]);
                $finish;
            end
        end
    endtask

    initial begin
        if (!$value$plusargs("script=%s", script_file) || !$value$plusargs("times=%s", times_file)) begin
            $display("raw: usage: +script=FILE +times=FILE");
            $finish;
        end
        $readmemh(script_file, script);
        // reset as testbench/sim/cocotb_device.py does it: 4 cycles in, 2 to come out
        repeat (4) @(posedge dut.clk);
        rst = 1'b0;
        repeat (2) @(posedge dut.clk);
        pc = 0;
        while (script[pc] != 32'd0) begin
            case (script[pc])
                32'd1: begin mmio_write(script[pc + 1][15:0], script[pc + 2]); pc = pc + 3; end
                32'd2: begin while (!irq) @(negedge dut.clk); pc = pc + 1; end
                32'd3: begin #(script[pc + 1] * 2 * `GPUCOSIM_HDL_CLOCK); pc = pc + 2; end
                32'd4: begin
                    $display("cycle %0d", $time / (2 * `GPUCOSIM_HDL_CLOCK));
`ifdef VERILATOR
                    $sformat(shell, "date +%%s%%N >> %0s", times_file);
                    $system(shell);
`endif
                    pc = pc + 1;
                end
                default: begin $display("raw: bad script word %0d at %0d", script[pc], pc); $finish; end
            endcase
        end
        if (chk_error) $display("raw: AXI checker flagged code %0d", chk_code);
        $display("raw: done");
        $finish;
    end
endmodule

`default_nettype wire
