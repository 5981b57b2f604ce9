"""Tiny models and generated data for the trainer-callback tests (in pytest and in torchrun ranks):
a BERT built from a config (no download) for Hugging Face, a linear module for Lightning."""

from __future__ import annotations

import torch


class Tokens(torch.utils.data.Dataset):
    """Sequences of 8 tokens; the label is whether the second token is in the upper half."""

    def __init__(self, n: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(0, 32, (n, 8), generator=g)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.ids[i], "attention_mask": torch.ones(8, dtype=torch.long), "labels": int(self.ids[i, 1] >= 16)}


def tiny_bert():
    """A one-layer BERT classifier, the same weights every call."""
    import transformers

    config = transformers.BertConfig(
        vocab_size=32,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=16,
        num_labels=2,
    )
    torch.manual_seed(0)
    return transformers.BertForSequenceClassification(config)


def tiny_lightning_module():
    """A linear classifier as a ``LightningModule`` that logs ``val_acc`` (synchronised across ranks)."""
    import lightning as L

    class Tiny(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.net = torch.nn.Linear(8, 2)

        def training_step(self, batch, _):
            x, y = batch
            return torch.nn.functional.cross_entropy(self.net(x), y)

        def validation_step(self, batch, _):
            x, y = batch
            self.log("val_acc", (self.net(x).argmax(1) == y).float().mean(), sync_dist=True)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.5)

    return Tiny()


def separable_data(n: int, batch_size: int, seed: int) -> torch.utils.data.DataLoader:
    """``n`` points in 8 dimensions labelled by the sign of the first coordinate."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 8, generator=g)
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, (x[:, 0] > 0).long()), batch_size=batch_size)
