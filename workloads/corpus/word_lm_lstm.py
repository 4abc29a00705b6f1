#!/usr/bin/env python3
"""Word-level LSTM language model with truncated back-propagation through time.

Written like PyTorch's word_language_model example: the corpus is one long
tensor of token ids, batchified into columns and sliced into --bptt-long
chunks; the hidden state is carried over (detached) from chunk to chunk;
gradients are clipped and the parameters updated by hand
(p.data.add_(p.grad, alpha=-lr)), with no optimizer object and no
DataLoader.  The validation set is evaluated after every epoch and the
learning rate annealed when it does not improve.  The corpus is synthetic
(a random Markov chain over --vocab words), so nothing is downloaded.
"""
import argparse
import math
import time

import torch
import torch.nn as nn


class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp, nhid, nlayers, dropout=0.2):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        self.nlayers, self.nhid = nlayers, nhid
        self.encoder.weight.data.uniform_(-0.1, 0.1)
        self.decoder.weight.data.uniform_(-0.1, 0.1)
        self.decoder.bias.data.zero_()

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output)
        return decoded.view(-1, decoded.size(-1)), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        return (weight.new_zeros(self.nlayers, bsz, self.nhid), weight.new_zeros(self.nlayers, bsz, self.nhid))


def synthetic_corpus(ntokens, vocab, seed):
    """A random walk over a sparse transition table: text with some structure to learn."""
    g = torch.Generator().manual_seed(seed)
    successors = torch.randint(0, vocab, (vocab, 8), generator=g)
    choice = torch.randint(0, 8, (ntokens,), generator=g)
    ids = torch.empty(ntokens, dtype=torch.long)
    word = 0
    table = successors.tolist()
    picks = choice.tolist()
    out = [0] * ntokens
    for i in range(ntokens):
        word = table[word][picks[i]]
        out[i] = word
    ids[:] = torch.tensor(out)
    return ids


def batchify(data, bsz, device):
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    return data.view(bsz, -1).t().contiguous().to(device)


def get_batch(source, i, bptt):
    seq_len = min(bptt, len(source) - 1 - i)
    data = source[i:i + seq_len]
    target = source[i + 1:i + 1 + seq_len].view(-1)
    return data, target


def repackage_hidden(h):
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def parse_args():
    p = argparse.ArgumentParser(description="LSTM word language model (truncated BPTT, manual SGD)")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--vocab", type=int, default=10000)
    p.add_argument("--train-tokens", type=int, default=2000000)
    p.add_argument("--valid-tokens", type=int, default=200000)
    p.add_argument("--emsize", type=int, default=650)
    p.add_argument("--nhid", type=int, default=650)
    p.add_argument("--nlayers", type=int, default=2)
    p.add_argument("--lr", type=float, default=20)
    p.add_argument("--clip", type=float, default=0.25)
    p.add_argument("--batch-size", type=int, default=20)
    p.add_argument("--bptt", type=int, default=35)
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--iters", type=int, default=None, help="stop after this many training batches")
    p.add_argument("--seconds", type=float, default=None, help="stop after this many seconds of training")
    p.add_argument("--log-interval", type=int, default=200)
    p.add_argument("--warmup-iters", type=int, default=5, help="batches left out of the final mean")
    p.add_argument("--seed", type=int, default=1111)
    args = p.parse_args()
    if args.iters is None and args.seconds is None:
        args.iters = 3000
    return args


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(args.device)

    corpus = synthetic_corpus(args.train_tokens + args.valid_tokens, args.vocab, args.seed)
    train_data = batchify(corpus[:args.train_tokens], args.batch_size, device)
    val_data = batchify(corpus[args.train_tokens:], 10, device)
    model = RNNModel(args.vocab, args.emsize, args.nhid, args.nlayers, args.dropout).to(device)
    criterion = nn.NLLLoss()
    log_softmax = nn.LogSoftmax(dim=1)
    print("| %d train batches per epoch, %s, torch %s" % (
        (train_data.size(0) - 1 + args.bptt - 1) // args.bptt, device, torch.__version__), flush=True)

    def evaluate(data_source):
        model.eval()
        total_loss = 0.0
        hidden = model.init_hidden(10)
        with torch.no_grad():
            for i in range(0, data_source.size(0) - 1, args.bptt):
                data, targets = get_batch(data_source, i, args.bptt)
                output, hidden = model(data, hidden)
                hidden = repackage_hidden(hidden)
                total_loss += len(data) * criterion(log_softmax(output), targets).item()
        return total_loss / (len(data_source) - 1)

    lr = args.lr
    best_val_loss = None
    times = []
    it = 0
    start = time.perf_counter()
    done = False
    epoch = 1
    while not done:
        model.train()
        total_loss = 0.0
        interval_start = time.perf_counter()
        interval_iters = 0
        hidden = model.init_hidden(args.batch_size)
        end = time.perf_counter()
        for batch, i in enumerate(range(0, train_data.size(0) - 1, args.bptt)):
            data, targets = get_batch(train_data, i, args.bptt)
            hidden = repackage_hidden(hidden)
            model.zero_grad()
            output, hidden = model(data, hidden)
            loss = criterion(log_softmax(output), targets)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-lr)
            total_loss += loss.item()

            it += 1
            interval_iters += 1
            now = time.perf_counter()
            times.append(now - end)
            end = now
            if batch % args.log_interval == 0 and batch > 0:
                cur_loss = total_loss / args.log_interval
                elapsed = now - interval_start
                print("| epoch %3d | %5d/%5d batches | lr %02.2f | %.2f ms/iter | loss %5.2f | ppl %8.2f" % (
                    epoch, batch, len(train_data) // args.bptt, lr, elapsed * 1000 / interval_iters,
                    cur_loss, math.exp(min(cur_loss, 50))), flush=True)
                total_loss = 0.0
                interval_start = now
                interval_iters = 0
            if (args.iters is not None and it >= args.iters) or \
                    (args.seconds is not None and now - start >= args.seconds):
                done = True
                break
        if done:
            break
        val_loss = evaluate(val_data)
        print("| end of epoch %3d | valid loss %5.2f | valid ppl %8.2f" % (
            epoch, val_loss, math.exp(min(val_loss, 50))), flush=True)
        if best_val_loss is None or val_loss < best_val_loss:
            best_val_loss = val_loss
        else:
            lr /= 4.0
        epoch += 1

    if device.type == "cuda":
        t0 = time.perf_counter()
        torch.cuda.synchronize()
        times[-1] += time.perf_counter() - t0
    warm = args.warmup_iters if len(times) > args.warmup_iters else 0
    measured = times[warm:]
    print("RESULT script=word_lm_lstm iters=%d warmup_iters=%d iter_ms_mean=%.3f iter_ms_p50=%.3f "
          "elapsed_s=%.2f device=%s epochs=%d" % (
              it, warm, 1000 * sum(measured) / len(measured), 1000 * sorted(measured)[len(measured) // 2],
              time.perf_counter() - start, device.type, epoch), flush=True)


if __name__ == "__main__":
    main()
