"""A.7 A typical training loop: train NeuralNetwork on the toy data, then evaluate it."""

from snippets.appendix_a import (  # the page shows these on A.5 to A.7
    NeuralNetwork, X_train, compute_accuracy, test_loader, train_loader, train_model, y_train,
)

# --8<-- [start:train]
import torch

torch.manual_seed(123)
model = NeuralNetwork(num_inputs=2, num_outputs=2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.5)

num_epochs = 3
train_model(model, train_loader, optimizer, num_epochs)
# --8<-- [end:train]


# --8<-- [start:outputs]
model.eval()
with torch.no_grad():
    outputs = model(X_train)
print(outputs)
# --8<-- [end:outputs]


# --8<-- [start:probabilities]
torch.set_printoptions(sci_mode=False)  # 0.0001 instead of 1.0000e-04
probas = torch.softmax(outputs, dim=1)
print(probas)
torch.set_printoptions(sci_mode=None)   # back to the default
# --8<-- [end:probabilities]


# --8<-- [start:predictions]
predictions = torch.argmax(probas, dim=1)
print(predictions)
# --8<-- [end:predictions]


# --8<-- [start:predictions_from_logits]
predictions = torch.argmax(outputs, dim=1)
print(predictions)
# --8<-- [end:predictions_from_logits]


# --8<-- [start:compare]
print(predictions == y_train)
print(torch.sum(predictions == y_train))
# --8<-- [end:compare]


# --8<-- [start:accuracy]
print(compute_accuracy(model, train_loader))
print(compute_accuracy(model, test_loader))
# --8<-- [end:accuracy]
