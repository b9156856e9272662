"""A.8 Saving and loading models: state_dict checkpoints and weights_only loading."""

import torch

from snippets.appendix_a import NeuralNetwork
from snippets.a7_training_loop import X_train, model  # the page's earlier-code block trains it again

# --8<-- [start:save]
import tempfile
from pathlib import Path

checkpoint_dir = Path(tempfile.mkdtemp(prefix="appendix-a-"))  # not your working directory
model_path = checkpoint_dir / "model.pth"

torch.save(model.state_dict(), model_path)
print(list(model.state_dict()))
# --8<-- [end:save]


# --8<-- [start:load]
loaded = NeuralNetwork(2, 2)  # the same architecture as the saved model
print(loaded.load_state_dict(torch.load(model_path, weights_only=True)))
# --8<-- [end:load]


# --8<-- [start:same_outputs]
model.eval()
loaded.eval()
with torch.no_grad():
    print(torch.equal(model(X_train), loaded(X_train)))
# --8<-- [end:same_outputs]


# --8<-- [start:architecture_mismatch]
wider = NeuralNetwork(2, 3)  # three outputs instead of two
try:
    wider.load_state_dict(torch.load(model_path, weights_only=True))
except RuntimeError as error:
    print(error)
# --8<-- [end:architecture_mismatch]


# --8<-- [start:weights_only_refuses_objects]
class Note:
    """Any class: unpickling it would run code that the file chooses."""


torch.save({"state": model.state_dict(), "note": Note()}, checkpoint_dir / "with-object.pth")
try:
    torch.load(checkpoint_dir / "with-object.pth", weights_only=True)
except Exception as error:  # pickle.UnpicklingError, with advice on what to do
    reason = next(line for line in str(error).splitlines() if "Unsupported global" in line)
    print(type(error).__name__ + ":", reason.strip())
# --8<-- [end:weights_only_refuses_objects]


# --8<-- [start:clean_up]
import shutil

shutil.rmtree(checkpoint_dir)
# --8<-- [end:clean_up]
