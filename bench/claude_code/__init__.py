"""bench claude-code: Claude Code (the Claude Agent SDK's bundled CLI) through a real gateway, two sessions."""
