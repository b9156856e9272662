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


# --8<-- [start:plot_loss]
import matplotlib.pyplot as plt

# The loop above prints each loss; to plot them, keep them in a list. The
# same seed and the same data order retrace that run step for step, so
# `model` ends up with the same weights.
torch.manual_seed(123)
model = NeuralNetwork(num_inputs=2, num_outputs=2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
losses = []
for epoch in range(num_epochs):
    for features, labels in train_loader:
        loss = F.cross_entropy(model(features), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())

fig, ax = plt.subplots(figsize=(5, 3), layout="constrained")
ax.plot(range(1, len(losses) + 1), losses, marker="o")
ax.set(xlabel="training step (batch)", ylabel="training loss", ylim=(0, None))
fig.savefig("training-loss.png")  # a file to keep
plt.show()                        # and a window, where there is a screen
# --8<-- [end:plot_loss]


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


# --8<-- [start:loss_of_probabilities]
print(F.cross_entropy(outputs, y_train))  # the loss, from the logits
print(F.cross_entropy(probas, y_train))   # softmax applied twice: wrong
# --8<-- [end:loss_of_probabilities]



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


# --8<-- [start:plot_decision_regions]
from matplotlib.colors import ListedColormap

# The class the model predicts at each point of a grid over the data
x1, x2 = torch.meshgrid(torch.linspace(-2, 4, 61), torch.linspace(-3, 4, 71),
                        indexing="xy")
grid = torch.stack([x1.flatten(), x2.flatten()], dim=1)
with torch.no_grad():
    regions = model(grid).argmax(dim=1).reshape(x1.shape)

colours = ListedColormap(["tab:blue", "tab:orange"])
fig, ax = plt.subplots(figsize=(5, 3.4), layout="constrained")
ax.imshow(regions, origin="lower", extent=(-2.05, 4.05, -3.05, 4.05),
          aspect="auto", cmap=colours, alpha=0.3, interpolation="nearest")
for label in (0, 1):
    points = X_train[y_train == label]
    ax.scatter(points[:, 0], points[:, 1], s=60, color=colours(label),
               edgecolors="black", label=f"class {label}")
ax.set(xlabel="feature 1", ylabel="feature 2")
ax.legend()
fig.savefig("decision-regions.png")  # a file to keep
plt.show()                           # and a window, where there is a screen
# --8<-- [end:plot_decision_regions]
