"""Plots drawn at record time from what a page's code computed, shown under that code.

Each plotter runs in the recording's child process right after its section, once per edition, with the
page's namespace, what the section printed and the edition's `plot_` words. It returns the figure, its
title (the alt text, in English: the hooks translate it) and the data behind it, which the check compares
instead of pixels. The child imports nothing of the project, so neither does this file.
"""


def toy_data(namespace, printed, words):
    import matplotlib.pyplot as plt

    X_train, y_train = namespace["X_train"], namespace["y_train"]
    X_test, y_test = namespace["X_test"], namespace["y_test"]
    figure, axes = plt.subplots(figsize=(5, 3.4), layout="constrained")
    for label, colour in [(0, "tab:blue"), (1, "tab:orange")]:
        train, test = X_train[y_train == label], X_test[y_test == label]
        axes.scatter(train[:, 0], train[:, 1], s=60, color=colour,
                     label=words["plot_class_of"].format(label=label, split=words["plot_training"]))
        axes.scatter(test[:, 0], test[:, 1], s=60, facecolors="none", edgecolors=colour, linewidths=2,
                     label=words["plot_class_of"].format(label=label, split=words["plot_test"]))
    axes.set(xlabel=words["plot_feature"].format(number=1), ylabel=words["plot_feature"].format(number=2))
    axes.legend(fontsize="small")
    data = {"X_train": X_train.tolist(), "y_train": y_train.tolist(),
            "X_test": X_test.tolist(), "y_test": y_test.tolist()}
    return figure, "The toy data: five training and two test examples in two classes", data


def training_loss(namespace, printed, words):
    import re

    import matplotlib.pyplot as plt

    losses = [float(loss) for loss in re.findall(r"Train/Val Loss: ([\d.]+)", printed)]
    figure, axes = plt.subplots(figsize=(5, 3), layout="constrained")
    axes.plot(range(1, len(losses) + 1), losses, marker="o")
    axes.set(xlabel=words["plot_step"], ylabel=words["plot_loss"], ylim=(0, None))
    return figure, "The training loss after each step, as the log above prints it", {"losses": losses}


def decision_regions(namespace, printed, words):
    import matplotlib.pyplot as plt
    import torch
    from matplotlib.colors import ListedColormap

    model, X_train, y_train = namespace["model"], namespace["X_train"], namespace["y_train"]
    xs, ys = torch.linspace(-2, 4, 61), torch.linspace(-3, 4, 71)
    grid = torch.cartesian_prod(ys, xs)[:, [1, 0]]  # rows of (x, y), y slowest
    with torch.no_grad():
        predicted = model(grid).argmax(dim=1).reshape(len(ys), len(xs))
    figure, axes = plt.subplots(figsize=(5, 3.4), layout="constrained")
    axes.imshow(predicted, origin="lower", extent=(-2.05, 4.05, -3.05, 4.05), aspect="auto", alpha=0.25,
                cmap=ListedColormap(["tab:blue", "tab:orange"]), interpolation="nearest")
    for label, colour in [(0, "tab:blue"), (1, "tab:orange")]:
        points = X_train[y_train == label]
        axes.scatter(points[:, 0], points[:, 1], s=60, color=colour, label=words["plot_class"].format(label=label))
    axes.set(xlabel=words["plot_feature"].format(number=1), ylabel=words["plot_feature"].format(number=2))
    axes.legend(fontsize="small")
    data = {"x": xs.tolist(), "y": ys.tolist(), "predicted": ["".join(map(str, row)) for row in predicted.tolist()]}
    return figure, "The class the trained model predicts at each point, with the training examples", data


# (page, section) -> plotter: the plot is shown under that section on that page.
PLOTS = {
    ("a6-efficient-data-loaders.md", "appendix_a:toy_test_data"): toy_data,
    ("a7-typical-training-loop.md", "a7_training_loop:train"): training_loss,
    ("a7-typical-training-loop.md", "a7_training_loop:accuracy"): decision_regions,
}


def plotters_for(page: str, cells) -> dict[int, str]:
    """{index of the cell: the name of its plotter}, for tools/page_runner.py, which runs this file."""
    return {index: PLOTS[(page, cell.key)].__name__ for index, cell in enumerate(cells) if (page, cell.key) in PLOTS}
