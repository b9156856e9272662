"""A.8 Saving and loading models: state_dict checkpoints and weights_only
loading."""

import torch

from snippets.a7_training_loop import X_train, model, outputs  # A.7's run
from snippets.appendix_a import NeuralNetwork

# --8<-- [start:save]
torch.save(model.state_dict(), "model.pth")
# --8<-- [end:save]


# --8<-- [start:state_dict_keys]
print(list(model.state_dict()))  # the names of the saved tensors
# --8<-- [end:state_dict_keys]


# --8<-- [start:buffers]
batch_norm = torch.nn.BatchNorm1d(2)
print(list(batch_norm.state_dict()))  # parameters, then buffers
print([name for name, _ in batch_norm.named_buffers()])  # the buffers alone
# --8<-- [end:buffers]


# --8<-- [start:load]
model = NeuralNetwork(2, 2) # needs to match the original model exactly
print(model.load_state_dict(torch.load("model.pth", weights_only=True)))
# --8<-- [end:load]


# --8<-- [start:same_outputs]
model.eval()
with torch.no_grad():
    print(torch.equal(model(X_train), outputs))  # outputs: A.7's logits
# --8<-- [end:same_outputs]


# --8<-- [start:architecture_mismatch]
wider = NeuralNetwork(2, 3)  # three outputs instead of two
try:
    wider.load_state_dict(torch.load("model.pth", weights_only=True))
except RuntimeError as error:
    print(error)
# --8<-- [end:architecture_mismatch]


# --8<-- [start:weights_only_refuses_objects]
class Note:
    """Any class: unpickling it would run code that the file chooses."""


checkpoint = {"state": model.state_dict(), "note": Note()}
torch.save(checkpoint, "with-object.pth")
try:
    torch.load("with-object.pth", weights_only=True)
except Exception as error:  # pickle.UnpicklingError, with advice on what to do
    lines = str(error).splitlines()
    reason = next(line for line in lines if "Unsupported global" in line)
    print(type(error).__name__ + ":", reason.strip())
# --8<-- [end:weights_only_refuses_objects]


# --8<-- [start:clean_up]
import os

os.remove("with-object.pth")  # model.pth stays, as in the book
# --8<-- [end:clean_up]
