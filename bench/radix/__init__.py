"""bench radix: a token-id trace replayed through the radix cache (and SGLang's).

sglang_replay.py is a resource, not a module: a script that another venv's
python runs (`--compare sglang`); radixgate never imports it.
"""
