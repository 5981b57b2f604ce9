"""The model and data of the allocation tests (a training file of theirs imports them): one SGD step
on a global batch split unevenly over ranks must equal one process's step on the whole batch."""

import torch


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 3)).double()


def make_data(n):
    g = torch.Generator().manual_seed(1)
    return torch.randn(n, 5, generator=g, dtype=torch.float64), torch.randn(n, 3, generator=g, dtype=torch.float64)


def single_process_params(global_batch: int, steps: int):
    """The reference: ``steps`` SGD steps of one process on consecutive whole global batches."""
    x, y = make_data(global_batch * steps)
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for i in range(steps):
        opt.zero_grad()
        torch.nn.functional.mse_loss(
            model(x[i * global_batch : (i + 1) * global_batch]), y[i * global_batch : (i + 1) * global_batch]
        ).backward()
        opt.step()
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()]).numpy()
