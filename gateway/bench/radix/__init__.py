"""bench radix: a token-id trace replayed through the radix cache (and SGLang's)."""
