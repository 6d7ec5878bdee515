"""Where the repository and the shared folder beside it are, for tests that read files by path."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED = REPO_ROOT.parent / "shared"
