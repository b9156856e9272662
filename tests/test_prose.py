"""What the prose says holds: each sentence about a recorded output against the recording (its mark, tools/claims.py),
and each fact about torch that the pages state but no output shows, on the torch the outputs were recorded with."""

import multiprocessing
import re
import sys

import pytest
from conftest import ROOT, needs_torch

from tools import claims, store
from tools.editions import CHINESE, ENGLISH
from tools.page_runner import run

PAGES = sorted(path.name for path in ENGLISH.docs.glob("*.md"))


def test_both_editions_say_the_same_of_the_outputs_and_it_holds():
    problems = []
    for page in PAGES:
        texts = {edition.docs.name: (edition.docs / page).read_text() for edition in (ENGLISH, CHINESE)}
        if [m[1] for m in claims.marks(texts["docs-zh"])] != [m[1] for m in claims.marks(texts["docs"])]:
            problems.append(f"docs-zh/{page} does not carry the marks of docs/{page}, in the same order")
        problems += [p for docs, text in texts.items() for p in claims.problems(text, f"{docs}/{page}")]
    assert not problems, "\n".join(problems)
    assert sum(len(claims.marks((ENGLISH.docs / page).read_text())) for page in PAGES) >= 60


@pytest.mark.parametrize("page, key, old, new, said", [
    ("a5-multilayer-neural-networks.md", "a5_multilayer_networks:softmax", "0.3113", "0.3114", "add up to 0.9999"),
    ("a7-typical-training-loop.md", "a7_training_loop:probabilities", "0.9949", "0.9849", "over 99%"),
    ("a7-typical-training-loop.md", "a7_training_loop:probabilities", "0.9693", "0.9393", "over 95%"),
    ("a4-automatic-differentiation.md", "a4_automatic_differentiation:gradients_accumulate", "-0.1797", "-0.1697",
     "the stored gradient doubles"),
    ("a9-gpu-training.md", "a7_training_loop:train", "Loss: 0.13", "Loss: 0.14", "the two decimals printed here"),
    ("exercises.md", "exercise_solutions:a4_matmul_timing", "152.1", "  52.1", "timed alone with the same number"),
])
def test_a_changed_output_fails_the_sentence_it_no_longer_fits(page, key, old, new, said):
    def read(wanted):
        text = store.stored_output(wanted)
        return text.replace(old, new, 1) if wanted == key else text

    assert old in store.stored_output(key), f"{key} no longer prints {old!r}: pick another change"
    for edition in (ENGLISH, CHINESE):
        [problem] = claims.problems((edition.docs / page).read_text(), page, read)
        assert re.match(rf"{page}:\d+: the recorded outputs no longer bear out “", problem), problem
        assert edition is CHINESE or said in problem, problem


def test_a_mark_reads_the_blocks_around_it_and_says_when_it_cannot_be_read():
    markdown = ('# Page\n\n```python\n--8<-- "snippets/m.py:first"\n```\n\nBetween.\n<!-- holds: {} -->\n\n'
                '```python\n--8<-- "snippets/m.py:second"\n```\n')
    outputs = {"m:first": "tensor([1, 2])\n", "m:second": "Loss: 0.25\nLoss: 0.5\n"}.get
    assert claims.problems(markdown.format("above == first and below == second"), "p.md", outputs) == []
    assert claims.problems(markdown.format("first.tensors == [[1, 2]] and second.after('Loss:') == [0.25, 0.5]"),
                           "p.md", outputs) == []
    [false] = claims.problems(markdown.format("above == second"), "p.md", outputs)
    assert false == "p.md:8: the recorded outputs no longer bear out “Between.”: `above == second` is false. " \
                    "Change the sentence and its mark together."
    [unread] = claims.problems(markdown.format("third.numbers == [3]"), "p.md", outputs)
    assert "cannot be read: NameError: name 'third' is not defined" in unread
    assert claims.without_marks(markdown.format("True")).count("\n\n") == 3  # no paragraph split or left behind
    example = "```text\nA sentence.\n<!-- holds: no_such_output.numbers == [1] -->\n```\n"  # as Authoring shows one
    assert claims.problems(example, "p.md", outputs) == [] and claims.without_marks(example) == example


# --- What the pages say about torch that no output of theirs shows

torch = pytest.fixture(needs_torch, scope="module", name="torch")


def test_a2_view_transpose_and_contiguous(torch):
    matrix = torch.tensor([[1, 2, 3], [4, 5, 6]])
    assert matrix.T.view(3, 2, 1).shape == (3, 2, 1)  # .view works where the strides allow, contiguous or not
    assert torch.equal(matrix.transpose(0, 1), matrix.T) and matrix.T.contiguous().is_contiguous()
    with pytest.warns(UserWarning, match="deprecated"):  # .T on a rank-3 tensor
        torch.zeros(2, 3, 4).T


def test_a4_when_a_tensor_is_recorded_and_how_accumulated_gradients_add_up(torch):
    w = torch.tensor([2.0])
    assert (w * 2).grad_fn is None
    w.requires_grad_()  # set after creation
    with torch.no_grad():
        assert (w * 2).grad_fn is None
    assert (w * 2).grad_fn is not None
    torch.manual_seed(123)
    x, y, weights = torch.randn(8, 3), torch.tensor([0, 1] * 4), torch.randn(3, 2, requires_grad=True)
    torch.nn.functional.cross_entropy(x @ weights, y).backward()
    whole, weights.grad = weights.grad, None
    for k in range(4):  # four batches of two, each loss divided by 4
        (torch.nn.functional.cross_entropy(x[2 * k:2 * k + 2] @ weights, y[2 * k:2 * k + 2]) / 4).backward()
    torch.testing.assert_close(weights.grad, whole)


def test_a5_and_a7_which_losses_take_logits(torch):
    F = torch.nn.functional
    logits, labels = torch.tensor([[2.0, -1.0], [0.5, 1.5]]), torch.tensor([0, 1])
    torch.testing.assert_close(F.cross_entropy(logits, labels), F.nll_loss(torch.log_softmax(logits, 1), labels))
    assert F.cross_entropy(torch.softmax(logits, 1), labels) > 1.5 * F.cross_entropy(logits, labels)
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        F.binary_cross_entropy(torch.tensor([2.0]), torch.tensor([1.0]))
    torch.testing.assert_close(F.binary_cross_entropy_with_logits(torch.tensor([2.0]), torch.tensor([1.0])),
                               F.binary_cross_entropy(torch.sigmoid(torch.tensor([2.0])), torch.tensor([1.0])))


def test_a7_eval_and_no_grad_are_separate_switches(torch):
    torch.manual_seed(123)
    model, x = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5)), torch.ones(1, 4)
    model.eval()
    assert model(x).grad_fn is not None, "eval() turned off the graph"
    model.train()
    with torch.no_grad():
        assert not torch.equal(model(x), model(x)), "no_grad() turned off dropout"


def test_a8_buffers_and_what_load_state_dict_says(torch):
    class Masked(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(2, 2)
            self.register_buffer("mask", torch.ones(2, 2))
            self.register_buffer("scratch", torch.ones(2), persistent=False)

    module = Masked()
    assert list(module.state_dict()) == ["mask", "linear.weight", "linear.bias"]
    assert module.to("meta").mask.device.type == "meta"
    partial = {name: tensor for name, tensor in Masked().state_dict().items() if name != "mask"}
    assert Masked().load_state_dict(partial, strict=False).missing_keys == ["mask"]
    with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: "mask"'):
        Masked().load_state_dict(partial)


def test_a8_a_gpt_checkpoint_needs_the_same_context_length(torch):
    """As the book's GPT holds them: a causal mask buffer and a positional embedding, both sized by context."""
    class Positions(torch.nn.Module):
        def __init__(self, context_length):
            super().__init__()
            self.pos_emb = torch.nn.Embedding(context_length, 4)
            self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    with pytest.raises(RuntimeError) as error:
        Positions(16).load_state_dict(Positions(8).state_dict())
    assert "size mismatch for mask" in str(error.value) and "size mismatch for pos_emb.weight" in str(error.value)


def test_a9_what_to_returns_and_the_tensors_that_mix_across_devices(torch):
    a = torch.ones(2)
    assert a.to("cpu") is a and a.to("meta") is not a
    assert (torch.ones(3, device="meta") + torch.tensor(2.0)).device.type == "meta"  # a 0-d CPU tensor mixes
    with pytest.raises(RuntimeError, match="device"):
        torch.ones(3, device="meta") + torch.tensor([2.0])
    assert torch.ones(3, device="meta")[torch.tensor([0, 2])].device.type == "meta"  # indexing moves CPU indices


NOTEBOOK_DATASET = """
import torch
from torch.utils.data import DataLoader, Dataset

class ToyDataset(Dataset):
    def __getitem__(self, index):
        return index

    def __len__(self):
        return 2

list(DataLoader(ToyDataset(), num_workers=1, multiprocessing_context="forkserver"))
"""


def test_a6_workers_that_start_fresh_cannot_import_a_notebooks_dataset(torch):
    """Defined in `__main__` without a file, as in a notebook; forkserver is Linux's default from Python 3.14."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        pytest.skip("this system has no forkserver start method")
    if sys.platform == "linux":
        assert multiprocessing.get_start_method() == ("forkserver" if sys.version_info >= (3, 14) else "fork")
    status, _, stderr = run([sys.executable, "-c", NOTEBOOK_DATASET], 120, cwd=ROOT)
    assert status != 0 and "AttributeError: Can't get attribute 'ToyDataset' on <module '__main__' (built-in)>" \
        in stderr, stderr
    assert re.search(r"RuntimeError: DataLoader worker \(pid\(s\) [\d, ]+\) exited unexpectedly", stderr), stderr
