"""Anthropic's Messages API as a wire format over the one request path (see docs/architecture.md):
schemas (the wire models), content + parse (body -> GenerationRequest), render + streaming
(Answer -> message / events), envelope (Anthropic's error shape)."""
