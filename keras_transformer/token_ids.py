"""The reserved token ids, shared by the tokenizer, the model and the search.

`PAD_ID` pads batches (and is masked everywhere), `UNK_ID` stands for
pieces outside the vocabulary, `START_ID` starts every decoder input and
`END_ID` ends every sentence.
"""

PAD_ID = 0
UNK_ID = 1
START_ID = 2
END_ID = 3
