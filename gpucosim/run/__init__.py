"""Running an app on a backend: `launch` starts the run (the reference model in this
process, or the RTL under a simulator, where `app_runner` is the cocotb side); `session`
is one run inside the app's process (observers, crash reports, the exit report); `app`
finds and loads the app; `stops` stops a run (--timeout, Ctrl-C, SIGTERM, SIGHUP);
`outputs` relays outputs that name gpucosim's own stdout or stderr; `console` is the
launcher's terminal (output and the status line).
"""
