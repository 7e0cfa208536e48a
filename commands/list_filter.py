"""The filter of `memory list` (and the Home tab's search) matches stems, as retrieval does.

A store filters a listing by whole words, and its prefilter reads at most MAX_MATCH_TOKENS of them
(the longest). So the filter is widened before it reaches the store: after the filter's own words,
the commonest other forms of each word — built from its letters and from its stem with the common
English endings — that the retrieval stemmer (`memory.ranking.lexical`) takes back to the same stem,
as many as the prefilter reads. `deploy` asks for deploy, deploys, deployed, deploying, deployment…;
a record matches when one of its words is one of those forms. Every form is checked against the
stemmer, so the widening never matches a word retrieval would not match.
"""

from __future__ import annotations

from memory.ranking.lexical import stem_words
from memory.rules.engine import MAX_MATCH_TOKENS
from memory.rules.scorer import query_terms

# Commonest first: a long filter keeps only the first few forms of each word.
_ENDINGS = ("s", "ed", "ing", "es", "d", "e", "ment", "ments", "ion", "ions", "ation", "ations", "er", "ers")
_DOUBLED = ("ed", "ing")  # stop → stopped, stopping
_Y_ENDINGS = ("y", "ies", "ied")  # happi → happy, happies


def widened_filter(text: str) -> str:
    """`text` as the whole words a store filters on: its own words, then other forms of them."""
    terms = list(dict.fromkeys(query_terms(text)))
    if not terms:
        return text
    forms = dict.fromkeys(terms)
    budget = max(0, MAX_MATCH_TOKENS - len(terms)) // len(terms)
    for term, stem in zip(terms, stem_words(terms), strict=True):
        candidates = [form for form in _candidates(term, stem) if form not in forms]
        same = [form for form, got in zip(candidates, stem_words(candidates), strict=True) if got == stem]
        forms.update(dict.fromkeys(same[:budget]))
    return " ".join(forms)


def _candidates(term: str, stem: str) -> list[str]:
    """Forms to try, commonest first, without repeats."""
    bases = tuple(dict.fromkeys((stem, term)))
    found = [stem, *(base + ending for ending in _ENDINGS for base in bases)]
    if stem[-1:].isalpha():
        found += [stem + stem[-1] + ending for ending in _DOUBLED]
    if stem.endswith("i"):
        found += [stem[:-1] + ending for ending in _Y_ENDINGS]
    return list(dict.fromkeys(found))
