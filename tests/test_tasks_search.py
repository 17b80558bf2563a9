"""The task modules of bench/search's suite (studies/tasks/tabular.py, studies/tasks/charlm.py): real data that ships
in a package or is generated, fixed splits, models that train, and the metrics the study files name."""

from __future__ import annotations

import numpy as np
import pytest
import sklearn  # noqa: F401  (its import sets KMP_* variables: done here, not inside a test)
import torch

from studies.tasks import charlm, tabular
from trainer import EvalPrediction


@pytest.mark.parametrize("name", sorted(tabular.DATASETS))
def test_every_table_splits_the_same_way_every_time_and_is_standardised(name):
    train, held = tabular.data({"dataset": name})
    again_train, again_held = tabular.data({"dataset": name})
    assert torch.equal(held.features, again_held.features) and torch.equal(held.labels, again_held.labels)
    assert abs(len(held) / (len(train) + len(held)) - tabular.EVAL_FRACTION) < 0.01
    assert torch.allclose(train.features.mean(0), torch.zeros(train.features.shape[1]), atol=1e-4)
    model = tabular.model_init({"dataset": name, "hidden_size": 16, "num_layers": 2, "dropout": 0.1})
    batch = {"features": train.features[:8], "labels": train.labels[:8]}
    output = model(**batch)
    assert torch.isfinite(output["loss"])
    classes = tabular.DATASETS[name]().classes
    assert output["logits"].shape == (8, max(classes, 1))


def test_the_tabular_model_refuses_what_it_does_not_take():
    with pytest.raises(ValueError, match="unknown parameter"):
        tabular.model_init({"width": 3})
    with pytest.raises(ValueError, match="unknown dataset"):
        tabular.data({"dataset": "covtype"})


def test_tabular_metrics_accuracy_for_classes_and_r2_for_a_regression():
    logits = np.array([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7]])
    found = tabular.compute_metrics(EvalPrediction(predictions=logits, label_ids=np.array([1, 0, 0])))
    assert found == {"accuracy": pytest.approx(2 / 3)}
    labels = np.array([1.0, -1.0, 0.0], dtype=np.float32)
    perfect = tabular.compute_metrics(EvalPrediction(predictions=labels[:, None], label_ids=labels))
    assert perfect == {"r2": pytest.approx(1.0)}


def test_the_char_lm_reads_pythons_help_topics_and_predicts_the_next_character():
    train, held = charlm.data()
    assert len(train) == charlm.TRAIN_WINDOWS and len(held) == charlm.EVAL_WINDOWS
    sample = train[0]
    assert torch.equal(
        sample["tokens"][1:], sample["labels"][:-1]
    )  # the labels are the tokens shifted by one
    assert int(train.windows.max()) < charlm.VOCAB
    model = charlm.model_init({"n_embd": 32, "n_layer": 1, "n_head": 2})
    with torch.no_grad():
        output = model(tokens=train.windows[:4, :-1], labels=train.windows[:4, 1:])
    assert output["logits"].shape == (4, charlm.BLOCK, charlm.VOCAB)
    assert (
        abs(float(output["loss"]) - np.log(charlm.VOCAB)) < 1.0
    )  # untrained: about uniform over the characters
    with pytest.raises(ValueError, match="not a multiple"):
        charlm.model_init({"n_embd": 30, "n_head": 4})


def test_the_char_lm_reads_standard_library_source_when_the_file_says_so_and_refuses_an_unknown_corpus():
    train, held = charlm.data({"corpus": "source"})
    help_train, _ = charlm.data()
    assert len(train) == charlm.TRAIN_WINDOWS and len(held) == charlm.EVAL_WINDOWS
    assert not torch.equal(train.windows, help_train.windows)  # another text, the same windows' layout
    source = charlm._text_codes("source")
    assert int(source.max()) < charlm.VOCAB
    # Python source: its most frequent character is the space of indentation
    assert int(np.bincount(source).argmax()) == ord(" ") - 32
    model = charlm.model_init(
        {"corpus": "source", "n_embd": 32, "n_head": 2}
    )  # the file's model section reaches it
    assert isinstance(model, charlm.CharGPT)
    with pytest.raises(ValueError, match="unknown corpus 'poems'"):
        charlm.data({"corpus": "poems"})


def test_the_char_lm_reads_numpys_docstrings_when_the_file_says_so():
    train, held = charlm.data({"corpus": "numpy_docs"})
    assert len(train) == charlm.TRAIN_WINDOWS and len(held) == charlm.EVAL_WINDOWS
    source_train, _ = charlm.data({"corpus": "source"})
    assert not torch.equal(train.windows, source_train.windows)
    text = charlm.CORPORA["numpy_docs"]()
    # numpy's docstring layout (numpydoc sections), the same text every time it is read
    assert "Parameters\n----------" in text and "Examples\n--------" in text
    assert text == charlm.CORPORA["numpy_docs"]()
    assert len(text) > 400_000  # about as much text as the help topics


def test_the_fourth_fresh_sets_tables_are_eight_classes_and_a_regression():
    blobs, roll = tabular.DATASETS["blobs"](), tabular.DATASETS["swiss_roll"]()
    assert blobs.classes == 8 and sorted(set(blobs.target.tolist())) == list(range(8))
    assert roll.classes == 0 and roll.features.shape == (3000, 8)


def test_the_char_lm_reads_the_unicode_character_names_when_the_file_says_so():
    train, held = charlm.data({"corpus": "unicode_names"})
    assert len(train) == charlm.TRAIN_WINDOWS and len(held) == charlm.EVAL_WINDOWS
    text = charlm.CORPORA["unicode_names"]()
    lines = text.splitlines()
    assert lines[0] == "0020 SPACE" and "0041 LATIN CAPITAL LETTER A" in lines
    # the numbered blocks (ideographs, syllables) are left out, or they would be most of the text
    assert not any(line.split(" ", 1)[1].startswith(charlm.NUMBERED_NAMES) for line in lines)
    assert "4E00 CJK UNIFIED IDEOGRAPH-4E00" not in lines
    assert text == charlm.CORPORA["unicode_names"]() and len(text) > 500_000


def test_the_fifth_fresh_sets_tables_are_five_imbalanced_classes_and_a_noisy_regression():
    imbalanced, curve = tabular.DATASETS["imbalanced"](), tabular.DATASETS["s_curve"]()
    counts = np.bincount(imbalanced.target)
    assert (
        imbalanced.classes == 5 and counts[0] > 4 * counts[4]
    )  # 40 % down to 8 %, before 3 % flipped labels
    assert curve.classes == 0 and curve.features.shape == (800, 6)


def test_the_sixth_fresh_set_reads_torchs_docstrings_and_makes_noisy_labels_and_a_sparse_regression():
    train, held = charlm.data({"corpus": "torch_docs"})
    assert len(train) == charlm.TRAIN_WINDOWS and len(held) == charlm.EVAL_WINDOWS
    text = charlm.CORPORA["torch_docs"]()
    assert text == charlm.CORPORA["torch_docs"]() and len(text) > 300_000
    assert (
        torch.zeros.__doc__.strip().splitlines()[0] in text
    )  # a docstring of the last names, the eval tenth's
    noisy, sparse = tabular.DATASETS["noisy_labels"](), tabular.DATASETS["sparse"]()
    assert noisy.classes == 3 and noisy.features.shape == (8000, 20)
    assert sparse.classes == 0 and sparse.features.shape == (2000, 200)


def test_the_seventh_fresh_set_reads_sklearns_docstrings_and_makes_a_wide_classification_and_a_noisy_regression():
    train, held = charlm.data({"corpus": "sklearn_docs"})
    assert len(train) == charlm.TRAIN_WINDOWS and len(held) == charlm.EVAL_WINDOWS
    text = charlm.CORPORA["sklearn_docs"]()
    assert text == charlm.CORPORA["sklearn_docs"]() and len(text) > 1_000_000
    assert "Parameters\n----------" in text  # the estimators' numpydoc sections
    wide, noisy = tabular.DATASETS["wide_classes"](), tabular.DATASETS["noisy_friedman"]()
    assert wide.classes == 6 and wide.features.shape == (24000, 40)
    assert noisy.classes == 0 and noisy.features.shape == (20000, 20)


def test_the_tenth_fresh_sets_tables_are_what_their_study_files_say():
    parity = tabular.DATASETS["parity"]()
    signs = parity.features[:, :3] > 0
    # no one column's sign says the class; the three signs' parity does, but for the tenth flipped
    assert all(abs(np.mean(signs[:, i] == parity.target) - 0.5) < 0.05 for i in range(3))
    assert abs(np.mean(signs.sum(1) % 2 == parity.target) - 0.9) < 0.02
    train, held = tabular.data({"dataset": "tiny_eval"})
    assert len(held) == 90 and tabular.DATASETS["tiny_eval"]().classes == 4  # accuracy in steps of 1/90
    pairwise = tabular.DATASETS["pairwise"]()
    assert pairwise.classes == 0 and pairwise.features.shape == (5000, 10)
