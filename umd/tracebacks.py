"""An app's traceback as its author reads it: the app's own frames and the one-line error,
without the drivers' frames inside the call that raised. The machinery is the KMD's
(kmd_model/tracebacks.py: a script whose first mistake is a KMD call, before any `import
umd`, reads one line too); the UMD adds its own errors (UmdError and its subclasses,
NotPermitted) to what it trims, and installs the excepthook when a script imports the UMD or
opens the GPU (`gpucosim run` prints an app's exception with the same trimming:
gpucosim/run/app.py).
"""

from __future__ import annotations

from kmd_model.tracebacks import app_traceback, install_for_script, ours, said_for_the_app, say_for_the_app, trim

from .errors import NotPermitted, UmdError

__all__ = ["app_traceback", "install_for_script", "ours", "said_for_the_app", "trim"]

say_for_the_app(UmdError, NotPermitted)
