"""The behaviour the chapters teach, asserted directly: training, checkpoints, batching, gradients."""

import re

import pytest
import torch
import torch.nn.functional as F

from snippets import appendix_a
from snippets.appendix_a import NeuralNetwork, X_train, compute_accuracy, train_model
from tools.sections import OUTPUTS


def recorded_tensor(module: str, section: str) -> torch.Tensor:
    """The numbers of a recorded `print(tensor)` output, as a tensor of the printed shape."""
    text = (OUTPUTS / module / f"{section}.txt").read_text()
    rows = re.findall(r"\[([^\[\]]+)\]", text)
    return torch.tensor([[float(v) for v in row.split(",")] for row in rows])


@pytest.fixture(scope="module")
def trained_model():
    torch.manual_seed(123)
    model = NeuralNetwork(num_inputs=2, num_outputs=2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    train_model(model, appendix_a.train_loader, optimizer, num_epochs=3)
    return model.eval()


def test_seeded_training_reproduces_the_recorded_outputs(trained_model):
    with torch.no_grad():
        outputs = trained_model(X_train)
    # The page prints 4 decimals, so the recorded numbers are exact to half a unit in the last one.
    torch.testing.assert_close(outputs, recorded_tensor("a7_training_loop", "outputs"), atol=5e-5, rtol=0)


def test_the_trained_model_classifies_everything_correctly(trained_model):
    assert len(appendix_a.train_ds) == 5
    assert compute_accuracy(trained_model, appendix_a.train_loader) == 1.0
    assert compute_accuracy(trained_model, appendix_a.test_loader) == 1.0


def test_a_loaded_model_computes_what_the_saved_one_did(trained_model, tmp_path):
    path = tmp_path / "model.pth"
    torch.save(trained_model.state_dict(), path)

    loaded = NeuralNetwork(2, 2)
    loaded.load_state_dict(torch.load(path, weights_only=True))

    with torch.no_grad():
        assert torch.equal(loaded.eval()(X_train), trained_model(X_train))


def test_loading_into_another_architecture_names_the_mismatch(trained_model, tmp_path):
    path = tmp_path / "model.pth"
    torch.save(trained_model.state_dict(), path)

    with pytest.raises(RuntimeError, match=r"size mismatch for layers\.4\.weight.*torch\.Size\(\[3, 20\]\)"):
        NeuralNetwork(2, 3).load_state_dict(torch.load(path, weights_only=True))


def test_batch_order_under_seed_123_is_the_recorded_one():
    torch.manual_seed(123)
    printed = "".join(f"Batch {i+1}: {x} {y}\n" for i, (x, y) in enumerate(appendix_a.train_loader))
    assert printed == (OUTPUTS / "a6_data_loaders" / "drop_last_batches.txt").read_text()
    torch.manual_seed(123)
    labels = [y.tolist() for _, y in appendix_a.train_loader]
    assert len(labels) == 2 and all(len(batch) == 2 for batch in labels)  # drop_last dropped the fifth


def test_gradients_from_grad_and_from_backward_are_equal():
    x1, y = torch.tensor([1.1]), torch.tensor([1.0])
    w1 = torch.tensor([2.2], requires_grad=True)
    b = torch.tensor([0.0], requires_grad=True)
    loss = F.binary_cross_entropy(torch.sigmoid(x1 * w1 + b), y)

    grad_w1, grad_b = torch.autograd.grad(loss, (w1, b), retain_graph=True)
    loss.backward()

    torch.testing.assert_close(w1.grad, grad_w1, rtol=0, atol=0)
    torch.testing.assert_close(b.grad, grad_b, rtol=0, atol=0)
    # and both agree with the chain rule worked out on the A.4 page: dL/db = a - 1, dL/dw1 = (a - 1) * x1
    a = torch.sigmoid(x1 * 2.2)
    torch.testing.assert_close(grad_b, a - 1)
    torch.testing.assert_close(grad_w1, (a - 1) * x1)
