// Ports every testbench toplevel shares (included at the end of its port list):
// the memory model's run-time settings (axi_mem's cfg_* inputs, set by
// testbench/memory.py) and the protocol checker's verdict (axi_checker's chk_*).
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
    input  wire [1:0]              cfg_err_resp,
    output wire                    chk_error,
    output wire [7:0]              chk_code,
    output wire [ADDR_WIDTH-1:0]   chk_addr,
    output wire [31:0]             chk_arg0,
    output wire [31:0]             chk_arg1,
    output wire [31:0]             chk_arg2
