"""The transformers cache keyword follows the model's forward signature (new `cache`, old `past_key_values`)."""

from types import SimpleNamespace

from bench.hf_cache import cache_keyword, cache_kwargs, returned_cache


class NewModel:
    def forward(self, input_ids=None, cache=None, use_cache=None):
        return SimpleNamespace(cache=("new", input_ids))


class OldModel:
    def forward(self, input_ids=None, past_key_values=None, use_cache=None):
        return SimpleNamespace(past_key_values=("old", input_ids))


def test_the_keyword_follows_the_forward_signature():
    assert cache_keyword(NewModel) == "cache"
    assert cache_keyword(OldModel) == "past_key_values"


def test_kwargs_name_the_cache_only_when_there_is_one():
    assert cache_kwargs(NewModel(), "kv") == {"cache": "kv"}
    assert cache_kwargs(OldModel(), "kv") == {"past_key_values": "kv"}
    assert cache_kwargs(NewModel(), None) == {}


def test_the_returned_cache_is_read_under_the_same_name():
    assert returned_cache(NewModel(), NewModel().forward(1)) == ("new", 1)
    assert returned_cache(OldModel(), OldModel().forward(2)) == ("old", 2)
