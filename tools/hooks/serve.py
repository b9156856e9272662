"""`mkdocs serve`: a page with a problem is served with it marked on the page (a strict build fails on the warning),
and each rebuild runs the tools as they are now."""

import logging
import os
import sys

log = logging.getLogger("mkdocs.hooks")
SERVING = "APPENDIX_A_SERVING"  # set by on_startup, which runs once; read by the hooks, on every rebuild


def on_startup(*, command: str, dirty: bool) -> None:
    os.environ[SERVING] = "1" if command == "serve" else ""


def on_serve(server, /, *, config, builder):
    """A change in tools/ rebuilds the site, but MkDocs loads each hook once (mkdocs/config/config_options.py,
    Hooks._load_hook is cached), and the tools they import with it: each rebuild loads them afresh first."""
    def build_afresh():
        for name in [name for name in sys.modules if name == "tools" or name.startswith("tools.")]:
            del sys.modules[name]
        for hook in config.hooks.values():
            hook.__spec__.loader.exec_module(hook)
        builder()

    server.builder = build_afresh
    return server


def serving() -> bool:
    return bool(os.environ.get(SERVING))


def problem(message: str, title: str = "Output out of date: run make outputs") -> str:
    """Warns; serving, also gives a box that says it, in Markdown, for the top of the page."""
    log.warning(message)
    return f'!!! failure "{title}"\n    {message}\n\n' if serving() else ""
