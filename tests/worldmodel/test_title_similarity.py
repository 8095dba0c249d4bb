"""Near-duplicate intent titles (worldmodel/similarity.py): a live host proposed "fuse max and sum into one
online-softmax pass" beside "online softmax: fuse max and sum into one pass, then a normalize pass" and it was
accepted (word overlap 0.78, under the 0.8 bound), though the new title said nothing the other did not."""

from __future__ import annotations

from ksearch.worldmodel.similarity import TitleKey, near_duplicate

OLD = TitleKey.of("online softmax: fuse max and sum into one pass, then a normalize pass")
SHORTER = TitleKey.of("fuse max and sum into one online-softmax pass")


def test_a_new_title_whose_words_are_all_in_a_siblings_is_a_near_duplicate() -> None:
    assert near_duplicate(SHORTER, OLD)


def test_a_longer_title_may_add_to_an_idea_and_short_ones_are_too_generic_to_judge() -> None:
    assert not near_duplicate(OLD, SHORTER)  # the other way round: it adds "then a normalize pass"
    assert not near_duplicate(
        TitleKey.of("vectorize the loads"), TitleKey.of("vectorize the loads and the stores")
    )
    assert not near_duplicate(
        TitleKey.of("tile rows by 64"), TitleKey.of("tile rows by 128 and fuse the max")
    )


def test_numbers_and_params_still_tell_ideas_apart() -> None:
    a = TitleKey.of("split K across programs with BLOCK_K 64")
    b = TitleKey.of("split K across programs with BLOCK_K 128, atomics")
    assert not near_duplicate(a, b)
    p = TitleKey.of("split K across four programs", {"SPLIT": 4})
    q = TitleKey.of("split K across four programs then reduce", {"SPLIT": 8})
    assert not near_duplicate(p, q)
