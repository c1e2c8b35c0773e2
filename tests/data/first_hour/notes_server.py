"""A small notes server, as a user writes one from the Python SDK's quick start: its notes live
in the folder the host configuration's `env` names (NOTES_DIR). Used by
tests/integration/first_hour.rs, which starts it the way a host does."""

import os
from pathlib import Path

from mcp.server.mcpserver import MCPServer

NOTES = Path(os.environ["NOTES_DIR"])
server = MCPServer("notes")


@server.tool()
def list_notes() -> list[str]:
    """The names of the notes."""
    return sorted(p.name for p in NOTES.iterdir() if p.is_file())


@server.tool()
def read_note(name: str) -> str:
    """The text of one note."""
    return (NOTES / name).read_text()


if __name__ == "__main__":
    server.run()
