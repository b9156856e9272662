"""A.7 A typical training loop: train NeuralNetwork on the toy data, then
evaluate it."""

import torch

from snippets.appendix_a import (  # the page shows these on A.5 to A.7
    NeuralNetwork, X_train, compute_accuracy, test_loader, train_loader,
    y_train,
)

# --8<-- [start:train]
import torch.nn.functional as F


torch.manual_seed(123)
model = NeuralNetwork(num_inputs=2, num_outputs=2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.5)

num_epochs = 3

for epoch in range(num_epochs):

    model.train()
    for batch_idx, (features, labels) in enumerate(train_loader):

        logits = model(features)

        loss = F.cross_entropy(logits, labels) # Loss function

        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

        ### LOGGING
        print(f"Epoch: {epoch+1:03d}/{num_epochs:03d}"
              f" | Batch {batch_idx+1:03d}/{len(train_loader):03d}"
              f" | Train/Val Loss: {loss:.2f}")

    model.eval()
    # Optional model evaluation
# --8<-- [end:train]


# --8<-- [start:outputs]
model.eval()

with torch.no_grad():
    outputs = model(X_train)

print(outputs)
# --8<-- [end:outputs]


# --8<-- [start:probabilities]
torch.set_printoptions(sci_mode=False)
probas = torch.softmax(outputs, dim=1)
print(probas)

predictions = torch.argmax(probas, dim=1)
print(predictions)
# --8<-- [end:probabilities]



# --8<-- [start:predictions_from_logits]
predictions = torch.argmax(outputs, dim=1)
print(predictions)
# --8<-- [end:predictions_from_logits]


# --8<-- [start:compare]
print(predictions == y_train)
# --8<-- [end:compare]


# --8<-- [start:count_correct]
print(torch.sum(predictions == y_train))
# --8<-- [end:count_correct]


# --8<-- [start:accuracy]
print(compute_accuracy(model, train_loader))
# --8<-- [end:accuracy]


# --8<-- [start:test_accuracy]
print(compute_accuracy(model, test_loader))
# --8<-- [end:test_accuracy]
