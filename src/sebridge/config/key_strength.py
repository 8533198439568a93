"""How guessable a key is: an estimate of its entropy in bits, sequences and repeats counted
as the little they add.

A length alone passes "0123456789" four times, and counting distinct characters
passes it too (ten of them). A person who types a key types patterns: runs
("aaaa", "abcd", "9876") and repeats of what came before ("pass" ... "pass").
So each character that starts nothing predictable costs log2 of the alphabet
its character classes span (lower case, upper case, digits, other ASCII, beyond ASCII), a
character that continues a run costs nothing, and a repeat of an earlier
stretch of three or more costs only where it came from. A key from a
generator (`openssl rand -base64 32`: about 280 bits by this count; hex of 32
bytes about 330) passes by far; a typed pattern does not. An estimate, as
zxcvbn's is: it never says a key is strong, only that some are not.
"""

from __future__ import annotations

import math
import string

__all__ = ["LEAST_BITS", "estimated_bits"]

# What a key must reach: 16 random bytes' worth, half of what the generated ones give.
LEAST_BITS = 128.0
_CLASSES = (string.ascii_lowercase, string.ascii_uppercase, string.digits)
_OTHER = 33  # printable ASCII that is neither a letter nor a digit, space included
_NON_ASCII = 1000  # the letters of the few scripts a person's keyboard offers besides ASCII
_REPEAT = 3  # a repeat shorter than this is chance, not a pattern


def _alphabet(text: str) -> int:
    """The size of the alphabet `text`'s character classes span."""
    size = sum(len(chars) for chars in _CLASSES if any(c in chars for c in text))
    size += _OTHER if any(c.isascii() and not c.isalnum() for c in text) else 0
    return size + (_NON_ASCII if any(not c.isascii() for c in text) else 0)


def _continues_run(text: str, i: int) -> bool:
    """text[i] goes on a run of the two before it: the same step of -1, 0 or +1."""
    if i < 2:
        return False
    step = ord(text[i - 1]) - ord(text[i - 2])
    return abs(step) <= 1 and ord(text[i]) - ord(text[i - 1]) == step


def _repeat_length(text: str, i: int) -> int:
    """The longest stretch from i that occurred earlier (0 under _REPEAT)."""
    longest = 0
    size = _REPEAT
    while i + size <= len(text) and text[i : i + size] in text[: i + size - 1]:
        longest = size
        size += 1
    return longest


def estimated_bits(text: str) -> float:
    """About how many bits a guesser who tries patterns first must cover to find `text`."""
    per_char = math.log2(max(_alphabet(text), 2))
    bits, i = 0.0, 0
    while i < len(text):
        repeat = _repeat_length(text, i)
        if repeat:
            bits += math.log2(i + 1)  # where the repeated stretch starts
            i += repeat
        elif _continues_run(text, i):
            i += 1
        else:
            bits += per_char
            i += 1
    return bits
