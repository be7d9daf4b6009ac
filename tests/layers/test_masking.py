import numpy as np
import pytest

from keras_transformer.layers import causal_mask, merge_masks, padding_mask


def test_padding_mask_marks_real_tokens():
    ids = np.array([[5, 7, 0, 0], [1, 0, 2, 0]])
    np.testing.assert_array_equal(np.asarray(padding_mask(ids)), ids != 0)
    np.testing.assert_array_equal(np.asarray(padding_mask(ids, pad_id=1)), ids != 1)


@pytest.mark.parametrize(
    "query_length, key_length, offset", [(4, None, 0), (2, 5, 0), (1, 6, 3), (2, 6, 3)]
)
def test_causal_mask_allows_keys_up_to_own_position(query_length, key_length, offset):
    mask = np.asarray(causal_mask(query_length, key_length, query_offset=offset))
    keys = query_length if key_length is None else key_length
    expected = np.array(
        [[j <= i + offset for j in range(keys)] for i in range(query_length)]
    )
    assert mask.dtype == bool
    np.testing.assert_array_equal(mask, expected[None])


def test_merge_masks_combines_key_padding_and_attention_mask():
    key_mask = np.array([[True, True, False], [True, False, False]])
    attention = np.asarray(causal_mask(3))
    merged = np.broadcast_to(
        np.asarray(merge_masks(None, key_mask, attention)), (2, 3, 3)
    )
    expected = key_mask[:, None, :] & attention
    np.testing.assert_array_equal(merged, expected)
    # Key padding alone broadcasts over the queries: (B, 1, S).
    np.testing.assert_array_equal(
        np.asarray(merge_masks(key_mask=key_mask)), key_mask[:, None, :]
    )
    assert merge_masks() is None


def test_merge_masks_never_masks_padded_queries():
    # A padded query row keeps its keys, so no row is left with nothing.
    query_mask = np.array([[True, False]])
    key_mask = np.array([[True, True]])
    merged = np.asarray(merge_masks(query_mask, key_mask))
    np.testing.assert_array_equal(
        np.broadcast_to(merged, (1, 2, 2)), np.ones((1, 2, 2))
    )
