// axi_checker: passive AXI4 protocol checker for one master/slave link.
//
// It checks the master (bursts INCR, within 4 KiB, size <= bus width, WLAST on the
// last beat of each burst, W bursts in AW order, W may lead AW) and the slave (R
// only for outstanding reads with that ID, RLAST on the burst's last beat, B only
// after a write's AW and last W beat), and on every channel that VALID stays high
// and the payload stays put until READY.
//
// The first violation latches chk_error with chk_code, chk_addr and chk_arg0..2 and
// prints one line; the codes and texts come from the table CHECKER_CODES in
// testbench/memory.py (the generated block below), which also formats the same text
// on the Python side. Reset clears the checker.
`default_nettype none

module axi_checker #(
    parameter DATA_WIDTH = 64,
    parameter ADDR_WIDTH = 48,
    parameter ID_WIDTH   = 4,
    parameter MAX_READS  = 16,   // reads tracked per ID
    parameter MAX_WRITES = 16,   // write bursts tracked between AW and W
    parameter INCR_ONLY  = 1     // flag FIXED and WRAP bursts
) (
    input  wire                    clk,
    input  wire                    rst,

    input  wire [ID_WIDTH-1:0]     axi_awid,
    input  wire [ADDR_WIDTH-1:0]   axi_awaddr,
    input  wire [7:0]              axi_awlen,
    input  wire [2:0]              axi_awsize,
    input  wire [1:0]              axi_awburst,
    input  wire                    axi_awvalid,
    input  wire                    axi_awready,
    input  wire [DATA_WIDTH-1:0]   axi_wdata,
    input  wire [DATA_WIDTH/8-1:0] axi_wstrb,
    input  wire                    axi_wlast,
    input  wire                    axi_wvalid,
    input  wire                    axi_wready,
    input  wire [ID_WIDTH-1:0]     axi_bid,
    input  wire [1:0]              axi_bresp,
    input  wire                    axi_bvalid,
    input  wire                    axi_bready,
    input  wire [ID_WIDTH-1:0]     axi_arid,
    input  wire [ADDR_WIDTH-1:0]   axi_araddr,
    input  wire [7:0]              axi_arlen,
    input  wire [2:0]              axi_arsize,
    input  wire [1:0]              axi_arburst,
    input  wire                    axi_arvalid,
    input  wire                    axi_arready,
    input  wire [ID_WIDTH-1:0]     axi_rid,
    input  wire [DATA_WIDTH-1:0]   axi_rdata,
    input  wire [1:0]              axi_rresp,
    input  wire                    axi_rlast,
    input  wire                    axi_rvalid,
    input  wire                    axi_rready,

    output reg                     chk_error,   // sticky until reset
    output reg  [7:0]              chk_code,    // first violation (CHK_* below)
    output reg  [ADDR_WIDTH-1:0]   chk_addr,
    output reg  [31:0]             chk_arg0,    // meaning per code: see its message
    output reg  [31:0]             chk_arg1,
    output reg  [31:0]             chk_arg2
);

    localparam NID        = 1 << ID_WIDTH;
    localparam BUS_BYTES  = DATA_WIDTH / 8;
    localparam RQW        = MAX_READS  > 1 ? $clog2(MAX_READS)  : 1;
    localparam WQW        = MAX_WRITES > 1 ? $clog2(MAX_WRITES) : 1;
    localparam RDEPTH     = 1 << RQW;   // rounded up to a power of two
    localparam WDEPTH     = 1 << WQW;

    // BEGIN generated from testbench/memory.py CHECKER_CODES (python -m testbench.memory); do not edit
    localparam [7:0] CHK_AW_4K = 8'h01;
    localparam [7:0] CHK_AR_4K = 8'h02;
    localparam [7:0] CHK_AW_BURST = 8'h03;
    localparam [7:0] CHK_AR_BURST = 8'h04;
    localparam [7:0] CHK_AW_SIZE = 8'h05;
    localparam [7:0] CHK_AR_SIZE = 8'h06;
    localparam [7:0] CHK_WLAST_MISSING = 8'h07;
    localparam [7:0] CHK_WLAST_EARLY = 8'h08;
    localparam [7:0] CHK_W_LEN_MISMATCH = 8'h09;
    localparam [7:0] CHK_W_TOO_LONG = 8'h0a;
    localparam [7:0] CHK_AW_VALID_DROP = 8'h10;
    localparam [7:0] CHK_AW_UNSTABLE = 8'h11;
    localparam [7:0] CHK_W_VALID_DROP = 8'h12;
    localparam [7:0] CHK_W_UNSTABLE = 8'h13;
    localparam [7:0] CHK_B_VALID_DROP = 8'h14;
    localparam [7:0] CHK_B_UNSTABLE = 8'h15;
    localparam [7:0] CHK_AR_VALID_DROP = 8'h16;
    localparam [7:0] CHK_AR_UNSTABLE = 8'h17;
    localparam [7:0] CHK_R_VALID_DROP = 8'h18;
    localparam [7:0] CHK_R_UNSTABLE = 8'h19;
    localparam [7:0] CHK_R_NO_READ = 8'h20;
    localparam [7:0] CHK_RLAST_MISSING = 8'h21;
    localparam [7:0] CHK_RLAST_EARLY = 8'h22;
    localparam [7:0] CHK_B_NO_WRITE = 8'h23;
    localparam [7:0] CHK_R_TRACK_FULL = 8'h30;
    localparam [7:0] CHK_W_TRACK_FULL = 8'h31;

    task chk_message(input [7:0] code, input [ADDR_WIDTH-1:0] addr,
                     input [31:0] a0, input [31:0] a1, input [31:0] a2);
        begin
            case (code)
                CHK_AW_4K: $display("axi_checker: AW burst %0d (ID %0d) at 0x%0h: %0d bytes cross a 4 KiB boundary", a0, a1, addr, a2);
                CHK_AR_4K: $display("axi_checker: AR burst %0d (ID %0d) at 0x%0h: %0d bytes cross a 4 KiB boundary", a0, a1, addr, a2);
                CHK_AW_BURST: $display("axi_checker: AW burst %0d (ID %0d) at 0x%0h: burst type %0d is not INCR", a0, a1, addr, a2);
                CHK_AR_BURST: $display("axi_checker: AR burst %0d (ID %0d) at 0x%0h: burst type %0d is not INCR", a0, a1, addr, a2);
                CHK_AW_SIZE: $display("axi_checker: AW burst %0d (ID %0d) at 0x%0h: beat size %0d bytes is wider than the bus", a0, a1, addr, a2);
                CHK_AR_SIZE: $display("axi_checker: AR burst %0d (ID %0d) at 0x%0h: beat size %0d bytes is wider than the bus", a0, a1, addr, a2);
                CHK_WLAST_MISSING: $display("axi_checker: W burst %0d at 0x%0h: WLAST missing on beat %0d of %0d", a0, addr, a1, a2);
                CHK_WLAST_EARLY: $display("axi_checker: W burst %0d at 0x%0h: WLAST on beat %0d of %0d", a0, addr, a1, a2);
                CHK_W_LEN_MISMATCH: $display("axi_checker: W burst %0d at 0x%0h: %0d beats sent ahead of AW, whose AWLEN gives %0d", a0, addr, a1, a2);
                CHK_W_TOO_LONG: $display("axi_checker: W burst %0d: no WLAST in %0d beats", a0, a1);
                CHK_AW_VALID_DROP: $display("axi_checker: AW channel: AWVALID dropped before AWREADY (ID %0d, address 0x%0h)", a0, addr);
                CHK_AW_UNSTABLE: $display("axi_checker: AW channel: payload changed while AWVALID waited for AWREADY (ID %0d, address 0x%0h)", a0, addr);
                CHK_W_VALID_DROP: $display("axi_checker: W channel: WVALID dropped before WREADY (W burst %0d)", a0);
                CHK_W_UNSTABLE: $display("axi_checker: W channel: WDATA/WSTRB/WLAST changed while WVALID waited for WREADY (W burst %0d)", a0);
                CHK_B_VALID_DROP: $display("axi_checker: B channel: BVALID dropped before BREADY (ID %0d)", a0);
                CHK_B_UNSTABLE: $display("axi_checker: B channel: BID/BRESP changed while BVALID waited for BREADY (ID %0d)", a0);
                CHK_AR_VALID_DROP: $display("axi_checker: AR channel: ARVALID dropped before ARREADY (ID %0d, address 0x%0h)", a0, addr);
                CHK_AR_UNSTABLE: $display("axi_checker: AR channel: payload changed while ARVALID waited for ARREADY (ID %0d, address 0x%0h)", a0, addr);
                CHK_R_VALID_DROP: $display("axi_checker: R channel: RVALID dropped before RREADY (ID %0d)", a0);
                CHK_R_UNSTABLE: $display("axi_checker: R channel: RID/RDATA/RRESP/RLAST changed while RVALID waited for RREADY (ID %0d)", a0);
                CHK_R_NO_READ: $display("axi_checker: R beat with ID %0d, but no read with that ID is outstanding", a0);
                CHK_RLAST_MISSING: $display("axi_checker: read burst (ID %0d) at 0x%0h: RLAST missing on beat %0d of %0d", a0, addr, a1, a2);
                CHK_RLAST_EARLY: $display("axi_checker: read burst (ID %0d) at 0x%0h: RLAST on beat %0d of %0d", a0, addr, a1, a2);
                CHK_B_NO_WRITE: $display("axi_checker: B with ID %0d, but no write with that ID has finished its AW and W beats", a0);
                CHK_R_TRACK_FULL: $display("axi_checker: checker capacity: more than %0d reads outstanding with ID %0d (raise MAX_READS)", a1, a0);
                CHK_W_TRACK_FULL: $display("axi_checker: checker capacity: more than %0d write bursts between AW and W (raise MAX_WRITES)", a1);
                default: $display("axi_checker: violation code %0d", code);
            endcase
        end
    endtask
    // END generated

    // ---------------------------------------------------------------- report
    reg hit;  // a violation was latched in this cycle (only the first one counts)

    task fail(input [7:0] code, input [ADDR_WIDTH-1:0] addr,
              input [31:0] a0, input [31:0] a1, input [31:0] a2);
        begin
            if (!chk_error && !hit) begin
                hit = 1'b1;
                chk_error <= 1'b1;
                chk_code  <= code;
                chk_addr  <= addr;
                chk_arg0  <= a0;
                chk_arg1  <= a1;
                chk_arg2  <= a2;
                chk_message(code, addr, a0, a1, a2);
            end
        end
    endtask

    // Address-channel rules shared by AW and AR.
    task check_addr(input [7:0] code_burst, input [7:0] code_size, input [7:0] code_4k,
                    input [31:0] n, input [ID_WIDTH-1:0] id, input [ADDR_WIDTH-1:0] addr,
                    input [7:0] len, input [2:0] size, input [1:0] burst);
        /* verilator lint_off UNUSEDSIGNAL */
        reg [ADDR_WIDTH-1:0] last;   // address of the burst's last byte (its 4 KiB page matters)
        /* verilator lint_on UNUSEDSIGNAL */
        reg [31:0] bytes;
        begin
            bytes = ({24'd0, len} + 32'd1) << size;
            last  = (addr & ~(({{(ADDR_WIDTH-1){1'b0}}, 1'b1} << size) - 1'b1))
                    + {{(ADDR_WIDTH-32){1'b0}}, bytes} - 1'b1;
            if (INCR_ONLY != 0 && burst != 2'b01)
                fail(code_burst, addr, n, {{(32-ID_WIDTH){1'b0}}, id}, {30'd0, burst});
            else if ((32'd1 << size) > BUS_BYTES)
                fail(code_size, addr, n, {{(32-ID_WIDTH){1'b0}}, id}, 32'd1 << size);
            else if (burst == 2'b01 && addr[ADDR_WIDTH-1:12] != last[ADDR_WIDTH-1:12])
                fail(code_4k, addr, n, {{(32-ID_WIDTH){1'b0}}, id}, bytes);
        end
    endtask

    function [31:0] id32(input [ID_WIDTH-1:0] id);
        id32 = {{(32-ID_WIDTH){1'b0}}, id};
    endfunction

    // ---------------------------------------------------------------- state
    // Handshake stability: what was offered without READY at the last edge.
    reg aw_wait, w_wait, b_wait, ar_wait, r_wait;
    reg [ID_WIDTH+ADDR_WIDTH+8+3+2-1:0]     aw_hold, ar_hold;
    reg [DATA_WIDTH+DATA_WIDTH/8:0]         w_hold;
    reg [ID_WIDTH+2-1:0]                    b_hold;
    reg [ID_WIDTH+DATA_WIDTH+2:0]           r_hold;

    // Reads: per ID, a queue of (len, addr) and the beat count of its head burst.
    reg [7:0]            rq_len  [0:NID*RDEPTH-1];
    reg [ADDR_WIDTH-1:0] rq_addr [0:NID*RDEPTH-1];
    reg [RQW-1:0]        rq_wp   [0:NID-1];
    reg [RQW-1:0]        rq_rp   [0:NID-1];
    reg [RQW:0]          rq_cnt  [0:NID-1];
    reg [7:0]            rq_beat [0:NID-1];
    reg [31:0]           ar_n;    // AR bursts so far (for messages)

    // Writes: AW bursts and W bursts are matched in order by number. aw_n / w_n
    // count AW handshakes / finished W bursts; a W burst whose AW has not come yet
    // leaves its length in wl_len. wb_done[id] counts writes that may now get a B.
    reg [7:0]            aq_len  [0:WDEPTH-1];
    reg [ID_WIDTH-1:0]   aq_id   [0:WDEPTH-1];
    reg [ADDR_WIDTH-1:0] aq_addr [0:WDEPTH-1];
    reg [7:0]            wl_len  [0:WDEPTH-1];
    reg [31:0]           aw_n, w_n;
    reg [8:0]            w_cnt;   // beats so far in the current W burst
    reg [31:0]           wb_done [0:NID-1];

    // Per-cycle temporaries (blocking; read only in this process).
    reg [31:0]           d, w_n0;
    reg [8:0]            w_cnt0;
    reg                  known;
    reg [7:0]            len;
    reg [ID_WIDTH-1:0]   wid;
    reg [ADDR_WIDTH-1:0] waddr;
    /* verilator lint_off UNUSEDSIGNAL */
    reg [31:0]           ridx;    // index into the per-ID read queues
    /* verilator lint_on UNUSEDSIGNAL */
    reg                  done;
    integer              i;

    reg                  aw_hs, w_hs, b_hs, ar_hs, r_hs;

    // Some VALID up, or one pending from the last edge: a net, re-evaluated only when one
    // of these changes, so a cycle with nothing to check costs Icarus one test.
    wire busy = axi_awvalid || axi_wvalid || axi_bvalid || axi_arvalid || axi_rvalid
                || aw_wait || w_wait || b_wait || ar_wait || r_wait;

    /* verilator lint_off BLKSEQ */  // the bookkeeping below is sequential code on purpose
    always @(posedge clk) begin
        hit = 1'b0;
        if (rst) begin
            chk_error <= 1'b0;
            chk_code  <= 8'd0;
            chk_addr  <= {ADDR_WIDTH{1'b0}};
            chk_arg0  <= 32'd0;
            chk_arg1  <= 32'd0;
            chk_arg2  <= 32'd0;
            aw_wait = 1'b0; w_wait = 1'b0; b_wait = 1'b0; ar_wait = 1'b0; r_wait = 1'b0;
            for (i = 0; i < NID; i = i + 1) begin
                rq_wp[i] = {RQW{1'b0}};
                rq_rp[i] = {RQW{1'b0}};
                rq_cnt[i] = {(RQW+1){1'b0}};
                rq_beat[i] = 8'd0;
                wb_done[i] = 32'd0;
            end
            ar_n = 32'd0;
            aw_n = 32'd0;
            w_n = 32'd0;
            w_cnt = 9'd0;
        end else if (busy) begin
            // (With no VALID up and none pending from the last edge there is nothing to
            // check or count: skipping the cycle saves the simulator the bookkeeping.)
            aw_hs = axi_awvalid && axi_awready;
            w_hs  = axi_wvalid  && axi_wready;
            b_hs  = axi_bvalid  && axi_bready;
            ar_hs = axi_arvalid && axi_arready;
            r_hs  = axi_rvalid  && axi_rready;

            // ---- VALID and payload hold until READY (every channel)
            if (aw_wait) begin
                if (!axi_awvalid)
                    fail(CHK_AW_VALID_DROP, aw_hold[ADDR_WIDTH+12:13], id32(aw_hold[ID_WIDTH+ADDR_WIDTH+12:ADDR_WIDTH+13]), 32'd0, 32'd0);
                else if ({axi_awid, axi_awaddr, axi_awlen, axi_awsize, axi_awburst} != aw_hold)
                    fail(CHK_AW_UNSTABLE, aw_hold[ADDR_WIDTH+12:13], id32(aw_hold[ID_WIDTH+ADDR_WIDTH+12:ADDR_WIDTH+13]), 32'd0, 32'd0);
            end
            if (w_wait) begin
                if (!axi_wvalid)
                    fail(CHK_W_VALID_DROP, {ADDR_WIDTH{1'b0}}, w_n, 32'd0, 32'd0);
                else if ({axi_wdata, axi_wstrb, axi_wlast} != w_hold)
                    fail(CHK_W_UNSTABLE, {ADDR_WIDTH{1'b0}}, w_n, 32'd0, 32'd0);
            end
            if (b_wait) begin
                if (!axi_bvalid)
                    fail(CHK_B_VALID_DROP, {ADDR_WIDTH{1'b0}}, id32(b_hold[ID_WIDTH+1:2]), 32'd0, 32'd0);
                else if ({axi_bid, axi_bresp} != b_hold)
                    fail(CHK_B_UNSTABLE, {ADDR_WIDTH{1'b0}}, id32(b_hold[ID_WIDTH+1:2]), 32'd0, 32'd0);
            end
            if (ar_wait) begin
                if (!axi_arvalid)
                    fail(CHK_AR_VALID_DROP, ar_hold[ADDR_WIDTH+12:13], id32(ar_hold[ID_WIDTH+ADDR_WIDTH+12:ADDR_WIDTH+13]), 32'd0, 32'd0);
                else if ({axi_arid, axi_araddr, axi_arlen, axi_arsize, axi_arburst} != ar_hold)
                    fail(CHK_AR_UNSTABLE, ar_hold[ADDR_WIDTH+12:13], id32(ar_hold[ID_WIDTH+ADDR_WIDTH+12:ADDR_WIDTH+13]), 32'd0, 32'd0);
            end
            if (r_wait) begin
                if (!axi_rvalid)
                    fail(CHK_R_VALID_DROP, {ADDR_WIDTH{1'b0}}, id32(r_hold[ID_WIDTH+DATA_WIDTH+2:DATA_WIDTH+3]), 32'd0, 32'd0);
                else if ({axi_rid, axi_rdata, axi_rresp, axi_rlast} != r_hold)
                    fail(CHK_R_UNSTABLE, {ADDR_WIDTH{1'b0}}, id32(r_hold[ID_WIDTH+DATA_WIDTH+2:DATA_WIDTH+3]), 32'd0, 32'd0);
            end

            // ---- B: only for a write whose AW and last W beat came at an earlier edge
            if (b_hs) begin
                if (wb_done[axi_bid] == 32'd0)
                    fail(CHK_B_NO_WRITE, {ADDR_WIDTH{1'b0}}, id32(axi_bid), 32'd0, 32'd0);
                else
                    wb_done[axi_bid] = wb_done[axi_bid] - 32'd1;
            end

            // ---- R: for an outstanding read with that ID; RLAST on its last beat
            if (r_hs) begin
                if (rq_cnt[axi_rid] == {(RQW+1){1'b0}}) begin
                    fail(CHK_R_NO_READ, {ADDR_WIDTH{1'b0}}, id32(axi_rid), 32'd0, 32'd0);
                end else begin
                    ridx = id32(axi_rid) * RDEPTH + {{(32-RQW){1'b0}}, rq_rp[axi_rid]};
                    len  = rq_len[ridx];
                    done = 1'b0;
                    if (rq_beat[axi_rid] == len) begin
                        if (!axi_rlast)
                            fail(CHK_RLAST_MISSING, rq_addr[ridx], id32(axi_rid), {24'd0, len} + 32'd1, {24'd0, len} + 32'd1);
                        done = 1'b1;
                    end else if (axi_rlast) begin
                        fail(CHK_RLAST_EARLY, rq_addr[ridx], id32(axi_rid), {24'd0, rq_beat[axi_rid]} + 32'd1, {24'd0, len} + 32'd1);
                        done = 1'b1;  // follow the slave: its burst ended here
                    end
                    if (done) begin
                        rq_beat[axi_rid] = 8'd0;
                        rq_rp[axi_rid]   = rq_rp[axi_rid] + 1'b1;
                        rq_cnt[axi_rid]  = rq_cnt[axi_rid] - 1'b1;
                    end else begin
                        rq_beat[axi_rid] = rq_beat[axi_rid] + 8'd1;
                    end
                end
            end

            // ---- W: beats counted against the AW of the same burst number
            d      = aw_n - w_n;         // > 0: AW ahead, < 0: W bursts ahead
            w_n0   = w_n;
            w_cnt0 = w_cnt;
            if (w_hs) begin
                known = !d[31] && d != 32'd0;
                if (known || (aw_hs && d == 32'd0)) begin
                    len   = known ? aq_len[w_n[WQW-1:0]]  : axi_awlen;
                    wid   = known ? aq_id[w_n[WQW-1:0]]   : axi_awid;
                    waddr = known ? aq_addr[w_n[WQW-1:0]] : axi_awaddr;
                    done  = 1'b0;
                    if (w_cnt >= {1'b0, len}) begin
                        if (!axi_wlast || w_cnt > {1'b0, len})
                            fail(CHK_WLAST_MISSING, waddr, w_n, {24'd0, len} + 32'd1, {24'd0, len} + 32'd1);
                        done = 1'b1;
                    end else if (axi_wlast) begin
                        fail(CHK_WLAST_EARLY, waddr, w_n, {23'd0, w_cnt} + 32'd1, {24'd0, len} + 32'd1);
                        done = 1'b1;
                    end
                    if (done) begin
                        wb_done[wid] = wb_done[wid] + 32'd1;
                        w_n   = w_n + 32'd1;
                        w_cnt = 9'd0;
                    end else begin
                        w_cnt = w_cnt + 9'd1;
                    end
                end else if (axi_wlast) begin
                    // W ahead of its AW: keep the length for when the AW comes.
                    if (w_n - aw_n >= WDEPTH)
                        fail(CHK_W_TRACK_FULL, {ADDR_WIDTH{1'b0}}, 32'd0, WDEPTH, 32'd0);
                    wl_len[w_n[WQW-1:0]] = w_cnt[7:0];
                    w_n   = w_n + 32'd1;
                    w_cnt = 9'd0;
                end else if (w_cnt == 9'd255) begin
                    fail(CHK_W_TOO_LONG, {ADDR_WIDTH{1'b0}}, w_n, 32'd256, 32'd0);
                    w_cnt = 9'd0;
                end else begin
                    w_cnt = w_cnt + 9'd1;
                end
            end

            // ---- AW: address rules; match against W bursts that came first
            if (aw_hs) begin
                check_addr(CHK_AW_BURST, CHK_AW_SIZE, CHK_AW_4K, aw_n, axi_awid, axi_awaddr,
                           axi_awlen, axi_awsize, axi_awburst);
                if (!d[31] && d >= WDEPTH)
                    fail(CHK_W_TRACK_FULL, axi_awaddr, 32'd0, WDEPTH, 32'd0);
                if (d[31]) begin
                    // Its W burst already ended: compare lengths, the write is complete.
                    if (wl_len[aw_n[WQW-1:0]] != axi_awlen)
                        fail(CHK_W_LEN_MISMATCH, axi_awaddr, aw_n, {24'd0, wl_len[aw_n[WQW-1:0]]} + 32'd1,
                             {24'd0, axi_awlen} + 32'd1);
                    wb_done[axi_awid] = wb_done[axi_awid] + 32'd1;
                end else if (d == 32'd0 && !w_hs && w_cnt0 > {1'b0, axi_awlen}) begin
                    // Its W burst is under way and already longer than AWLEN.
                    fail(CHK_WLAST_MISSING, axi_awaddr, w_n0, {24'd0, axi_awlen} + 32'd1, {24'd0, axi_awlen} + 32'd1);
                end
                aq_len[aw_n[WQW-1:0]]  = axi_awlen;
                aq_id[aw_n[WQW-1:0]]   = axi_awid;
                aq_addr[aw_n[WQW-1:0]] = axi_awaddr;
                aw_n = aw_n + 32'd1;
            end

            // ---- AR: address rules; queue under its ID
            if (ar_hs) begin
                check_addr(CHK_AR_BURST, CHK_AR_SIZE, CHK_AR_4K, ar_n, axi_arid, axi_araddr,
                           axi_arlen, axi_arsize, axi_arburst);
                if (rq_cnt[axi_arid] == RDEPTH) begin
                    fail(CHK_R_TRACK_FULL, axi_araddr, id32(axi_arid), RDEPTH, 32'd0);
                end else begin
                    ridx = id32(axi_arid) * RDEPTH + {{(32-RQW){1'b0}}, rq_wp[axi_arid]};
                    rq_len[ridx]  = axi_arlen;
                    rq_addr[ridx] = axi_araddr;
                    rq_wp[axi_arid]  = rq_wp[axi_arid] + 1'b1;
                    rq_cnt[axi_arid] = rq_cnt[axi_arid] + 1'b1;
                end
                ar_n = ar_n + 32'd1;
            end

            // What is offered without READY now must still be there at the next edge.
            aw_wait = axi_awvalid && !axi_awready;
            w_wait  = axi_wvalid  && !axi_wready;
            b_wait  = axi_bvalid  && !axi_bready;
            ar_wait = axi_arvalid && !axi_arready;
            r_wait  = axi_rvalid  && !axi_rready;
            if (aw_wait) aw_hold = {axi_awid, axi_awaddr, axi_awlen, axi_awsize, axi_awburst};
            if (w_wait)  w_hold  = {axi_wdata, axi_wstrb, axi_wlast};
            if (b_wait)  b_hold  = {axi_bid, axi_bresp};
            if (ar_wait) ar_hold = {axi_arid, axi_araddr, axi_arlen, axi_arsize, axi_arburst};
            if (r_wait)  r_hold  = {axi_rid, axi_rdata, axi_rresp, axi_rlast};
        end
    end
    /* verilator lint_on BLKSEQ */

endmodule

`default_nettype wire
