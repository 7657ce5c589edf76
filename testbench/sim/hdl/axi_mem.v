// axi_mem: AXI4 slave memory model whose storage is a shared file.
//
// The bytes live in the file named by $GPUCOSIM_MEM_FILE, mapped by C code inside
// the simulator (DPI-C on Verilator, VPI system tasks on Icarus: testbench/sim/csrc/)
// and by Python as a numpy memmap (testbench/memory.py). No Python runs per beat.
//
// Behaviour (settable at run time through the cfg_* inputs):
// - Reads are served in order from a queue of MAX_READS bursts, one beat per cycle
//   with no gap between bursts. Each burst carries its own due time, so latency is
//   pipelined, not serialising. cfg_rd_latency counts cycles from the AR handshake
//   to the first R handshake; the minimum (and the value for 0..2) is 2.
// - Writes: W beats are accepted once their AW is queued (W never leads AW here,
//   which is legal); B comes cfg_wr_latency cycles after the last W beat (min 2).
// - cfg_stall_*: probability/256 per cycle that READY (aw, w, ar) is withheld or
//   VALID (b, r) is not raised; seeded by cfg_seed at reset (xorshift64).
// - Beats whose address is in [cfg_err_base, cfg_err_limit) answer cfg_err_resp
//   (2 SLVERR, 3 DECERR; limit <= base disables); bus words not wholly inside the
//   file answer DECERR. Such reads return 0 and such writes are dropped.
// - Bursts FIXED, INCR and WRAP; any size up to the bus width; narrow beats use
//   the lanes of their address; writes honour WSTRB within those lanes. A read
//   beat returns the whole bus word it falls in.
//
// The C side maps the file on first access and drops the mapping in reset, so each
// test may bring a new file: export it before releasing reset.
`default_nettype none

module axi_mem #(
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
    /* verilator lint_off UNUSEDSIGNAL */
    input  wire                    s_axi_wlast,   // bursts end by AWLEN; axi_checker checks WLAST
    /* verilator lint_on UNUSEDSIGNAL */
    input  wire                    s_axi_wvalid,
    output wire                    s_axi_wready,
    output reg  [ID_WIDTH-1:0]     s_axi_bid,
    output reg  [1:0]              s_axi_bresp,
    output reg                     s_axi_bvalid,
    input  wire                    s_axi_bready,
    input  wire [ID_WIDTH-1:0]     s_axi_arid,
    input  wire [ADDR_WIDTH-1:0]   s_axi_araddr,
    input  wire [7:0]              s_axi_arlen,
    input  wire [2:0]              s_axi_arsize,
    input  wire [1:0]              s_axi_arburst,
    input  wire                    s_axi_arvalid,
    output wire                    s_axi_arready,
    output reg  [ID_WIDTH-1:0]     s_axi_rid,
    output reg  [DATA_WIDTH-1:0]   s_axi_rdata,
    output reg  [1:0]              s_axi_rresp,
    output reg                     s_axi_rlast,
    output reg                     s_axi_rvalid,
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
    input  wire [1:0]              cfg_err_resp
);

    localparam STRB_WIDTH = DATA_WIDTH / 8;
    localparam NWORDS     = DATA_WIDTH / 32;
    localparam LANE_BITS  = $clog2(STRB_WIDTH);
    localparam RQW        = MAX_READS  > 1 ? $clog2(MAX_READS)  : 1;
    localparam WQW        = MAX_WRITES > 1 ? $clog2(MAX_WRITES) : 1;
    localparam [1:0] OKAY = 2'b00, DECERR = 2'b11;
    /* verilator lint_off WIDTH */  // sized copies of the integer parameters
    localparam [RQW-1:0] RQ_LAST = MAX_READS - 1;
    localparam [WQW-1:0] WQ_LAST = MAX_WRITES - 1;
    localparam [RQW:0]   RQ_FULL = MAX_READS;
    localparam [WQW:0]   WQ_FULL = MAX_WRITES;
    localparam [63:0]    WORD_MASK = ~(STRB_WIDTH - 64'd1);  // bus-word alignment
    /* verilator lint_on WIDTH */

    generate
        if (DATA_WIDTH != 32 && DATA_WIDTH != 64 && DATA_WIDTH != 128 && DATA_WIDTH != 256) begin : g_bad_width
            initial begin
                $display("axi_mem: DATA_WIDTH must be 32, 64, 128 or 256, not %0d", DATA_WIDTH);
                $finish;
            end
        end
    endgenerate

    // ---------------------------------------------------------------- storage access
`ifdef VERILATOR
    import "DPI-C" function longint gpumem_dpi_size();
    import "DPI-C" function void gpumem_dpi_release();
    import "DPI-C" function int gpumem_dpi_rd32(input longint addr);
    import "DPI-C" function void gpumem_dpi_wr32(input longint addr, input int data, input int strb);
`endif

    reg [63:0]           mem_size;     // bytes; valid once mem_mapped
    reg                  mem_mapped;   // the C side has mapped the file since reset
    reg [63:0]           mem_addr;     // bus-word address of the current access
    reg [DATA_WIDTH-1:0] mem_rdata;

    // Map the file (first access after reset) and learn its size.
    task mem_open;
        begin
            if (!mem_mapped) begin
`ifdef VERILATOR
                mem_size = gpumem_dpi_size();
`else
                $gpumem_size(mem_size);
`endif
                mem_mapped = 1'b1;
            end
        end
    endtask

    task mem_close;
        begin
            if (mem_mapped) begin
`ifdef VERILATOR
                gpumem_dpi_release();
`else
                $gpumem_release;
`endif
            end
            mem_mapped = 1'b0;
        end
    endtask

    task mem_read;  // mem_rdata = bus word at mem_addr
`ifdef VERILATOR
        integer i;
        begin
            for (i = 0; i < NWORDS; i = i + 1)
                mem_rdata[32*i +: 32] = gpumem_dpi_rd32(mem_addr + 64'd4 * i);
        end
`else
        begin
            $gpumem_read(mem_addr, mem_rdata);
        end
`endif
    endtask

    task mem_write(input [DATA_WIDTH-1:0] data, input [STRB_WIDTH-1:0] strb);
`ifdef VERILATOR
        integer i;
        begin
            for (i = 0; i < NWORDS; i = i + 1)
                if (strb[4*i +: 4] != 4'd0)
                    gpumem_dpi_wr32(mem_addr + 64'd4 * i, data[32*i +: 32], {28'd0, strb[4*i +: 4]});
        end
`else
        begin
            $gpumem_write(mem_addr, data, strb);
        end
`endif
    endtask

    // ---------------------------------------------------------------- helpers
    // Address of the beat after `a` in a burst (AXI4 A3.4.1).
    function [ADDR_WIDTH-1:0] next_addr(input [ADDR_WIDTH-1:0] a, input [2:0] size,
                                        input [7:0] len, input [1:0] burst);
        reg [ADDR_WIDTH-1:0] step, aligned, wrap_mask;
        begin
            step      = {{(ADDR_WIDTH-1){1'b0}}, 1'b1} << size;
            aligned   = a & ~(step - 1'b1);
            wrap_mask = (({{(ADDR_WIDTH-8){1'b0}}, len} + 1'b1) << size) - 1'b1;
            case (burst)
                2'b00:   next_addr = a;                                              // FIXED
                2'b10:   next_addr = (a & ~wrap_mask) | ((aligned + step) & wrap_mask);  // WRAP
                default: next_addr = aligned + step;                                 // INCR
            endcase
        end
    endfunction

    // Response for a beat at `a`: the error window first, then the file's end.
    function [1:0] beat_resp(input [ADDR_WIDTH-1:0] a);
        reg [63:0] word;
        begin
            word = {{(64-ADDR_WIDTH){1'b0}}, a} & WORD_MASK;
            if (cfg_err_limit > cfg_err_base && a >= cfg_err_base && a < cfg_err_limit)
                beat_resp = cfg_err_resp;
            else if (word >= mem_size || mem_size - word < ~WORD_MASK + 64'd1)
                beat_resp = DECERR;
            else
                beat_resp = OKAY;
        end
    endfunction

    // Byte lanes a beat at `a` of 2**size bytes may use (A3.4.3, narrow transfers).
    function [STRB_WIDTH-1:0] lane_mask(input [LANE_BITS-1:0] a, input [2:0] size);
        integer i;
        reg [8:0] lo, hi;
        begin
            lo = {{(9-LANE_BITS){1'b0}}, a};
            hi = (lo & ~((9'd1 << size) - 9'd1)) + (9'd1 << size);
            for (i = 0; i < STRB_WIDTH; i = i + 1)
                lane_mask[i] = (i >= lo) && (i < hi);
        end
    endfunction

    // ---------------------------------------------------------------- time and dice
    reg  [31:0] cyc;   // free-running cycle count; due times compare wrap-safely
    reg  [63:0] rnd;   // xorshift64 state, one byte per channel per cycle

    function [63:0] xorshift(input [63:0] x);
        reg [63:0] y;
        begin
            y = x ^ (x << 13);
            y = y ^ (y >> 7);
            xorshift = y ^ (y << 17);
        end
    endfunction

    // ---------------------------------------------------------------- queues
    reg [ID_WIDTH-1:0]   arq_id    [0:MAX_READS-1];
    reg [ADDR_WIDTH-1:0] arq_addr  [0:MAX_READS-1];
    reg [7:0]            arq_len   [0:MAX_READS-1];
    reg [2:0]            arq_size  [0:MAX_READS-1];
    reg [1:0]            arq_burst [0:MAX_READS-1];
    reg [31:0]           arq_due   [0:MAX_READS-1];   // cycle its first beat may load
    reg [RQW-1:0]        arq_wp, arq_rp;
    reg [RQW:0]          arq_cnt;
    reg [7:0]            r_beat;   // beat index within the head burst
    reg [ADDR_WIDTH-1:0] r_addr;   // address of beat r_beat when r_beat != 0

    reg [ID_WIDTH-1:0]   awq_id    [0:MAX_WRITES-1];
    reg [ADDR_WIDTH-1:0] awq_addr  [0:MAX_WRITES-1];
    reg [7:0]            awq_len   [0:MAX_WRITES-1];
    reg [2:0]            awq_size  [0:MAX_WRITES-1];
    reg [1:0]            awq_burst [0:MAX_WRITES-1];
    reg [WQW-1:0]        awq_wp, awq_rp;
    reg [WQW:0]          awq_cnt;
    reg [7:0]            w_beat;
    reg [ADDR_WIDTH-1:0] w_addr;
    reg [1:0]            w_resp;   // worst response of the burst's beats so far

    reg [ID_WIDTH-1:0]   bq_id     [0:MAX_WRITES-1];
    reg [1:0]            bq_resp   [0:MAX_WRITES-1];
    reg [31:0]           bq_due    [0:MAX_WRITES-1];
    reg [WQW-1:0]        bq_wp, bq_rp;
    reg [WQW:0]          bq_cnt;

    // READYs are registered: they depend only on queue room and the dice.
    reg arready_q, awready_q, wready_q;
    assign s_axi_arready = arready_q;
    assign s_axi_awready = awready_q;
    assign s_axi_wready  = wready_q;

    // ---------------------------------------------------------------- the model
    // One process, so the lazily learnt memory size is shared by both sides. The
    // blocking assignments are per-cycle temporaries; keeping the decode here
    // rather than in continuous assignments also keeps Icarus's event count low.
    reg [1:0]            resp;
    /* verilator lint_off UNUSEDSIGNAL */  // only the sign bit of a wait time matters
    reg [31:0]           wait_t;
    /* verilator lint_on UNUSEDSIGNAL */
    reg                  ar_push, aw_push, w_fire, r_load, r_last, w_last, b_load;
    reg [ADDR_WIDTH-1:0] baddr;
    reg [RQW:0]          arq_next;
    reg [WQW:0]          awq_next, bq_next;
    reg [63:0]           rnd_next;

    // Nothing offered or in flight, the READYs at their resting values and no stall dice:
    // such a cycle only counts (the body below would write every other register its own
    // value). A net, re-evaluated only when one of its inputs changes: a quiet cycle costs
    // Icarus one test instead of the whole body's reads (docs/architecture.md, "Speed round 19").
    wire quiet = !s_axi_arvalid && !s_axi_awvalid && !s_axi_wvalid && !s_axi_rvalid && !s_axi_bvalid
                 && arq_cnt == {(RQW+1){1'b0}} && awq_cnt == {(WQW+1){1'b0}} && bq_cnt == {(WQW+1){1'b0}}
                 && arready_q && awready_q && !wready_q
                 && (cfg_stall_aw | cfg_stall_w | cfg_stall_b | cfg_stall_ar | cfg_stall_r) == 8'd0;

    /* verilator lint_off BLKSEQ */
    always @(posedge clk) begin
        if (rst) begin
            mem_close;
            cyc          <= 32'd0;
            rnd          <= {cfg_seed ^ 32'h9e3779b9, ~cfg_seed};  // never all-zero
            arq_wp       <= {RQW{1'b0}};
            arq_rp       <= {RQW{1'b0}};
            arq_cnt      <= {(RQW+1){1'b0}};
            r_beat       <= 8'd0;
            s_axi_rvalid <= 1'b0;
            awq_wp       <= {WQW{1'b0}};
            awq_rp       <= {WQW{1'b0}};
            awq_cnt      <= {(WQW+1){1'b0}};
            w_beat       <= 8'd0;
            w_resp       <= OKAY;
            bq_wp        <= {WQW{1'b0}};
            bq_rp        <= {WQW{1'b0}};
            bq_cnt       <= {(WQW+1){1'b0}};
            s_axi_bvalid <= 1'b0;
            arready_q    <= 1'b0;
            awready_q    <= 1'b0;
            wready_q     <= 1'b0;
        end else if (quiet) begin
            cyc <= cyc + 32'd1;
        end else begin
            cyc <= cyc + 32'd1;
            ar_push = s_axi_arvalid && arready_q;
            aw_push = s_axi_awvalid && awready_q;
            w_fire  = s_axi_wvalid  && wready_q;

            // AR: queue the burst with the cycle its first beat may be loaded.
            if (ar_push) begin
                arq_id[arq_wp]    <= s_axi_arid;
                arq_addr[arq_wp]  <= s_axi_araddr;
                arq_len[arq_wp]   <= s_axi_arlen;
                arq_size[arq_wp]  <= s_axi_arsize;
                arq_burst[arq_wp] <= s_axi_arburst;
                arq_due[arq_wp]   <= cyc + {16'd0, cfg_rd_latency} - 32'd1;
                arq_wp            <= arq_wp == RQ_LAST ? {RQW{1'b0}} : arq_wp + 1'b1;
            end

            // R: load the next beat of the head burst into the output register.
            wait_t = cyc - arq_due[arq_rp];
            r_load = (!s_axi_rvalid || s_axi_rready) && arq_cnt != 0 && !wait_t[31]
                     && !(rnd[39:32] < cfg_stall_r);
            r_last = r_beat == arq_len[arq_rp];
            if (r_load) begin
                baddr = r_beat == 8'd0 ? arq_addr[arq_rp] : r_addr;
                mem_open;
                resp = beat_resp(baddr);
                if (resp == OKAY) begin
                    mem_addr = {{(64-ADDR_WIDTH){1'b0}}, baddr} & WORD_MASK;
                    mem_read;
                    s_axi_rdata <= mem_rdata;
                end else begin
                    s_axi_rdata <= {DATA_WIDTH{1'b0}};
                end
                s_axi_rvalid <= 1'b1;
                s_axi_rid    <= arq_id[arq_rp];
                s_axi_rresp  <= resp;
                s_axi_rlast  <= r_last;
                if (r_last) begin
                    r_beat <= 8'd0;
                    arq_rp <= arq_rp == RQ_LAST ? {RQW{1'b0}} : arq_rp + 1'b1;
                end else begin
                    r_beat <= r_beat + 8'd1;
                    r_addr <= next_addr(baddr, arq_size[arq_rp], arq_len[arq_rp], arq_burst[arq_rp]);
                end
            end else if (s_axi_rready) begin
                s_axi_rvalid <= 1'b0;
            end
            arq_next = arq_cnt + {{RQW{1'b0}}, ar_push} - {{RQW{1'b0}}, r_load && r_last};
            arq_cnt <= arq_next;

            // AW: queue the burst; its W beats follow in order.
            if (aw_push) begin
                awq_id[awq_wp]    <= s_axi_awid;
                awq_addr[awq_wp]  <= s_axi_awaddr;
                awq_len[awq_wp]   <= s_axi_awlen;
                awq_size[awq_wp]  <= s_axi_awsize;
                awq_burst[awq_wp] <= s_axi_awburst;
                awq_wp            <= awq_wp == WQ_LAST ? {WQW{1'b0}} : awq_wp + 1'b1;
            end

            // W: store the beat; on the burst's last beat (by AWLEN) queue its B.
            w_last = w_fire && w_beat == awq_len[awq_rp];
            if (w_fire) begin
                baddr = w_beat == 8'd0 ? awq_addr[awq_rp] : w_addr;
                mem_open;
                resp = beat_resp(baddr);
                if (resp == OKAY) begin
                    mem_addr = {{(64-ADDR_WIDTH){1'b0}}, baddr} & WORD_MASK;
                    mem_write(s_axi_wdata, s_axi_wstrb & lane_mask(baddr[LANE_BITS-1:0], awq_size[awq_rp]));
                end
                if (resp > w_resp) w_resp <= resp;  // the worst response wins
                if (w_last) begin
                    bq_id[bq_wp]   <= awq_id[awq_rp];
                    bq_resp[bq_wp] <= resp > w_resp ? resp : w_resp;
                    bq_due[bq_wp]  <= cyc + {16'd0, cfg_wr_latency} - 32'd1;
                    bq_wp          <= bq_wp == WQ_LAST ? {WQW{1'b0}} : bq_wp + 1'b1;
                    w_beat         <= 8'd0;
                    w_resp         <= OKAY;
                    awq_rp         <= awq_rp == WQ_LAST ? {WQW{1'b0}} : awq_rp + 1'b1;
                end else begin
                    w_beat <= w_beat + 8'd1;
                    w_addr <= next_addr(baddr, awq_size[awq_rp], awq_len[awq_rp], awq_burst[awq_rp]);
                end
            end
            awq_next = awq_cnt + {{WQW{1'b0}}, aw_push} - {{WQW{1'b0}}, w_last};
            awq_cnt <= awq_next;

            // B: present the head response once it is due.
            wait_t = cyc - bq_due[bq_rp];
            b_load = (!s_axi_bvalid || s_axi_bready) && bq_cnt != 0 && !wait_t[31]
                     && !(rnd[23:16] < cfg_stall_b);
            if (b_load) begin
                s_axi_bvalid <= 1'b1;
                s_axi_bid    <= bq_id[bq_rp];
                s_axi_bresp  <= bq_resp[bq_rp];
                bq_rp        <= bq_rp == WQ_LAST ? {WQW{1'b0}} : bq_rp + 1'b1;
            end else if (s_axi_bready) begin
                s_axi_bvalid <= 1'b0;
            end
            bq_next = bq_cnt + {{WQW{1'b0}}, w_last} - {{WQW{1'b0}}, b_load};
            bq_cnt <= bq_next;

            // Dice for the next cycle (rolled only while some stall is set) and the
            // READYs they gate.
            rnd_next = (cfg_stall_aw | cfg_stall_w | cfg_stall_b | cfg_stall_ar | cfg_stall_r) != 8'd0
                       ? xorshift(rnd) : rnd;
            rnd       <= rnd_next;
            arready_q <= arq_next != RQ_FULL && !(rnd_next[31:24] < cfg_stall_ar);
            awready_q <= awq_next != WQ_FULL && !(rnd_next[7:0] < cfg_stall_aw);
            wready_q  <= awq_next != {(WQW+1){1'b0}} && bq_next != WQ_FULL && !(rnd_next[15:8] < cfg_stall_w);
        end
    end
    /* verilator lint_on BLKSEQ */

endmodule

`default_nettype wire
