"""Detokenizer: UTF-8-safe deltas, stop strings trimmed and never streamed."""

from engine.detokenizer import Detokenizer


class ByteTokenizer:
    """Each id is one byte (ids >= 256 are special and skipped), like byte-level BPE at its finest."""

    def decode(self, ids, skip_special_tokens=True):
        return bytes(i for i in ids if i < 256).decode("utf-8", errors="replace")


def ids_of(text: str) -> list[int]:
    return list(text.encode("utf-8"))


def stream(text: str, stop=()):
    detok = Detokenizer(ByteTokenizer(), [], list(stop))
    deltas = []
    for token in ids_of(text):
        deltas.append(detok.add_token(token))
        if detok.is_stopped:
            break
    deltas.append(detok.finish())
    return deltas, detok


def test_multibyte_characters_are_released_whole():
    deltas, detok = stream("héllo 👋 wörld")
    assert "".join(deltas) == "héllo 👋 wörld" == detok.text
    assert all("\ufffd" not in d for d in deltas)
    assert "👋" in deltas  # the 4-byte emoji arrives as one delta, after its last byte


def test_stop_string_is_trimmed_and_never_streamed():
    deltas, detok = stream("The answer is 42.\nUser: more", stop=["\nUser:"])
    assert "".join(deltas) == "The answer is 42." == detok.text
    assert detok.is_stopped and detok.matched_stop == "\nUser:"


def test_partial_stop_prefix_is_released_when_it_does_not_complete():
    deltas, detok = stream("a\nUb", stop=["\nUser:"])
    assert "".join(deltas) == "a\nUb" and not detok.is_stopped and detok.matched_stop is None


def test_earliest_of_several_stop_strings_wins():
    _, detok = stream("one two three", stop=["three", "two"])
    assert detok.text == "one " and detok.matched_stop == "two"


def test_special_tokens_add_no_text():
    detok = Detokenizer(ByteTokenizer(), [], [])
    assert detok.add_token(300) == "" and detok.add_token(ord("x")) == "x"
