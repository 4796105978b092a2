"""RESTRICTED written in small capitals or inside a longer run of letters (second new-user trial of issue 14)."""

from __future__ import annotations

import pytest
from langchain_core.documents import Document

from langchain_ragspine.sensitivity import is_restricted, is_restricted_label


@pytest.mark.parametrize(
    "label",
    ["ʀᴇsᴛʀɪᴄᴛᴇᴅ", "ʀᴇꜱᴛʀɪᴄᴛᴇᴅ", "RestrictedData", "RESTRICTEDRESTRICTED", "dataRestricted", "XRESTRICTED",
     "restricted2", "UNRESTRICTEDRESTRICTED", "ʀᴇsᴛʀɪᴄᴛᴇᴅData",
     "RESTRICTEDNESS"],  # was open before; RESTRICTED inside a word now fails closed (only UN… is another word)
)
def test_restricted_in_small_capitals_or_inside_a_word_is_restricted(label):
    # regression: each of these was read as "not restricted", and the chunk was searchable
    assert is_restricted_label(label)
    assert is_restricted(Document(page_content="x", metadata={"sensitivity": label}))


@pytest.mark.parametrize("label", ["UNRESTRICTED", "Unrestricted", "unrestrictedData", "PUBLIC", "INTERNAL",
                                   "restrict", "RESTRICTIVE", "ᴘᴜʙʟɪᴄ"])
def test_other_words_stay_open(label):
    assert not is_restricted_label(label)
