import torch


def make():
    """Push the way the pole falls: a two-unit ReLU net over angle + angular velocity."""
    net = torch.nn.Sequential(torch.nn.Linear(4, 2), torch.nn.ReLU(), torch.nn.Linear(2, 2))
    with torch.no_grad():
        net[0].weight.copy_(torch.tensor([[0.0, 0.1, 1.0, 1.0], [0.0, -0.1, -1.0, -1.0]]))
        net[0].bias.zero_()
        net[2].weight.copy_(torch.tensor([[-1.0, 1.0], [1.0, -1.0]]))
        net[2].bias.zero_()
    return net
