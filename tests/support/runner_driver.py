"""Driver: feeds named token chunks through a ModelRunner and checks each logits row against transformers."""

import torch

from engine.forward_batch import make_forward_batch
from engine.models.llama import ModelShape
from engine.runner import ModelRunner
from tests.support.tiny_models import SeqSlots, SlotPool

TOLERANCE = 1e-4


class Driver:
    """Feeds token chunks of named sequences through the runner and checks every logits row."""

    def __init__(self, reference, loaded, page_size, num_pages=512, tolerance=TOLERANCE):
        shape = ModelShape.from_config(loaded.config)
        self.pool = SlotPool(num_pages, page_size, shape.num_layers, shape.num_kv_heads, shape.head_dim)
        self.runner = ModelRunner(loaded, self.pool, dtype=torch.float32, device="cpu")
        self.reference = reference
        self.tokens, self.slots = {}, {}
        self.max_diff = 0.0
        self.tolerance = tolerance

    def step(self, chunks):
        """chunks: list of (name, new token ids); returns the logits rows after checking them."""
        new_ids, kv_slots = [], []
        for name, ids in chunks:
            self.tokens.setdefault(name, [])
            self.slots.setdefault(name, SeqSlots(self.pool))
            self.tokens[name] = self.tokens[name] + list(ids)
            new_ids.append(list(ids))
            kv_slots.append(self.slots[name].extend(len(ids)))
        batch = make_forward_batch(new_ids, kv_slots)
        batch.validate()
        logits = self.runner.forward(batch)
        for row, (name, _) in enumerate(chunks):
            expected = self.reference_logits(self.tokens[name])
            diff = (logits[row] - expected).abs().max().item()
            self.max_diff = max(self.max_diff, diff)
            assert diff <= self.tolerance, f"{name} at length {len(self.tokens[name])}: max abs diff {diff}"
        return logits

    @torch.inference_mode()
    def reference_logits(self, tokens):
        return self.reference(torch.tensor([tokens])).logits[0, -1].float()
