"""The chat request path: prepare (canonicalize, render, tokenize), run, stream, answer."""
