"""`colibri serve`: an OpenAI-compatible HTTP server over colibri.serving (see docs/SERVER.md)."""
from __future__ import annotations

import logging

from .app import ServerConfig, create_app

__all__ = ["ServerConfig", "create_app", "serve"]


def serve(config: ServerConfig, host: str = "127.0.0.1", port: int = 8000, log_level: str = "info") -> None:
    """Run the server until interrupted. The model loads in the background (/health: 503 until
    it is ready); if it cannot be loaded the server stops and ModelError says why."""
    import uvicorn

    from ..errors import ModelError

    logging.basicConfig(level=getattr(logging, log_level.upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    app = create_app(config)
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level=log_level, access_log=False,
                                           timeout_graceful_shutdown=5))
    state = app.state.colibri
    state.on_load_failed = lambda: setattr(server, "should_exit", True)
    logging.getLogger("colibri.server").info("loading %s; the chat page and API at http://%s:%d/", config.model,
                                             host, port)
    server.run()
    if state.load_error:
        raise ModelError(state.load_error)
