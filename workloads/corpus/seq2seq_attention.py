#!/usr/bin/env python3
"""PyTorch's classic "Translation with a Sequence to Sequence Network and
Attention" tutorial, as many course and student scripts still write it.

One sentence pair a training iteration (no batching): a GRU encoder run
token by token in a Python loop, an attention decoder run token by token,
teacher forcing on a random half of the pairs (otherwise the decoder's own
top-1 guess is fed back and `.item()` stops it at EOS), NLLLoss summed over
the target's tokens, one `loss.backward()` and two SGD optimizers
(`encoder_optimizer.step()`, `decoder_optimizer.step()`) back to back.
Sentences have 3 to `--max-length` - 1 tokens, so the work of an iteration
varies several fold from one pair to the next.  The "language" is
synthetic: the target is the source reversed through a fixed word map.
"""
import argparse
import random
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

SOS_token = 0
EOS_token = 1


def parse_args():
    p = argparse.ArgumentParser(description="seq2seq translation with attention, one pair an iteration")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--vocab", type=int, default=2000)
    p.add_argument("--hidden-size", type=int, default=256)
    p.add_argument("--max-length", type=int, default=10)
    p.add_argument("--pairs", type=int, default=5000)
    p.add_argument("--teacher-forcing-ratio", type=float, default=0.5)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--iters", type=int, default=None)
    p.add_argument("--seconds", type=float, default=None)
    p.add_argument("--print-every", type=int, default=100)
    p.add_argument("--warmup-iters", type=int, default=10, help="iterations left out of the final mean")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if args.max_length < 5:
        p.error("--max-length must be at least 5")
    if args.iters is None and args.seconds is None:
        args.iters = 5000
    return args


class EncoderRNN(nn.Module):
    def __init__(self, input_size, hidden_size):
        super(EncoderRNN, self).__init__()
        self.hidden_size = hidden_size
        self.embedding = nn.Embedding(input_size, hidden_size)
        self.gru = nn.GRU(hidden_size, hidden_size)

    def forward(self, input, hidden):
        embedded = self.embedding(input).view(1, 1, -1)
        output, hidden = self.gru(embedded, hidden)
        return output, hidden

    def initHidden(self, device):
        return torch.zeros(1, 1, self.hidden_size, device=device)


class AttnDecoderRNN(nn.Module):
    def __init__(self, hidden_size, output_size, max_length, dropout_p=0.1):
        super(AttnDecoderRNN, self).__init__()
        self.hidden_size = hidden_size
        self.max_length = max_length
        self.embedding = nn.Embedding(output_size, hidden_size)
        self.attn = nn.Linear(hidden_size * 2, max_length)
        self.attn_combine = nn.Linear(hidden_size * 2, hidden_size)
        self.dropout = nn.Dropout(dropout_p)
        self.gru = nn.GRU(hidden_size, hidden_size)
        self.out = nn.Linear(hidden_size, output_size)

    def forward(self, input, hidden, encoder_outputs):
        embedded = self.dropout(self.embedding(input).view(1, 1, -1))
        attn_weights = F.softmax(self.attn(torch.cat((embedded[0], hidden[0]), 1)), dim=1)
        attn_applied = torch.bmm(attn_weights.unsqueeze(0), encoder_outputs.unsqueeze(0))
        output = torch.cat((embedded[0], attn_applied[0]), 1)
        output = F.relu(self.attn_combine(output).unsqueeze(0))
        output, hidden = self.gru(output, hidden)
        output = F.log_softmax(self.out(output[0]), dim=1)
        return output, hidden, attn_weights


def make_pairs(args, rng):
    word_map = list(range(2, args.vocab))
    rng.shuffle(word_map)
    pairs = []
    for _ in range(args.pairs):
        n = rng.randint(3, args.max_length - 1)
        src = [rng.randrange(2, args.vocab) for _ in range(n)]
        tgt = [word_map[w - 2] for w in reversed(src)]
        pairs.append((src, tgt))
    return pairs


def tensor_from_sentence(words, device):
    return torch.tensor(words + [EOS_token], dtype=torch.long, device=device).view(-1, 1)


def train(input_tensor, target_tensor, encoder, decoder, encoder_optimizer, decoder_optimizer, criterion,
          max_length, teacher_forcing_ratio, device):
    encoder_hidden = encoder.initHidden(device)
    encoder_optimizer.zero_grad()
    decoder_optimizer.zero_grad()
    input_length = input_tensor.size(0)
    target_length = target_tensor.size(0)
    encoder_outputs = torch.zeros(max_length, encoder.hidden_size, device=device)
    loss = 0
    for ei in range(input_length):
        encoder_output, encoder_hidden = encoder(input_tensor[ei], encoder_hidden)
        encoder_outputs[ei] = encoder_output[0, 0]

    decoder_input = torch.tensor([[SOS_token]], device=device)
    decoder_hidden = encoder_hidden
    use_teacher_forcing = random.random() < teacher_forcing_ratio
    if use_teacher_forcing:
        for di in range(target_length):
            decoder_output, decoder_hidden, _ = decoder(decoder_input, decoder_hidden, encoder_outputs)
            loss += criterion(decoder_output, target_tensor[di])
            decoder_input = target_tensor[di]
    else:
        for di in range(target_length):
            decoder_output, decoder_hidden, _ = decoder(decoder_input, decoder_hidden, encoder_outputs)
            topv, topi = decoder_output.topk(1)
            decoder_input = topi.squeeze().detach()
            loss += criterion(decoder_output, target_tensor[di])
            if decoder_input.item() == EOS_token:
                break

    loss.backward()
    encoder_optimizer.step()
    decoder_optimizer.step()
    return loss.item() / target_length


def main():
    args = parse_args()
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    if args.device == "auto":
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        device = torch.device(args.device)

    pairs = make_pairs(args, random.Random(args.seed))
    encoder = EncoderRNN(args.vocab, args.hidden_size).to(device)
    decoder = AttnDecoderRNN(args.hidden_size, args.vocab, args.max_length).to(device)
    encoder_optimizer = torch.optim.SGD(encoder.parameters(), lr=args.lr)
    decoder_optimizer = torch.optim.SGD(decoder.parameters(), lr=args.lr)
    criterion = nn.NLLLoss()
    print("%d pairs, vocab %d, hidden %d, max length %d, %s, torch %s" % (
        len(pairs), args.vocab, args.hidden_size, args.max_length, device, torch.__version__), flush=True)

    times = []
    print_loss_total = 0.0
    it = 0
    start = time.perf_counter()
    end = start
    while True:
        src, tgt = random.choice(pairs)
        input_tensor = tensor_from_sentence(src, device)
        target_tensor = tensor_from_sentence(tgt, device)
        loss = train(input_tensor, target_tensor, encoder, decoder, encoder_optimizer, decoder_optimizer,
                     criterion, args.max_length, args.teacher_forcing_ratio, device)
        print_loss_total += loss
        it += 1
        now = time.perf_counter()
        times.append(now - end)
        end = now
        if it % args.print_every == 0:
            recent = times[-args.print_every:]
            print("%.1fs (%d) %.4f %.3f ms/iter" % (
                now - start, it, print_loss_total / args.print_every, 1000 * sum(recent) / len(recent)),
                flush=True)
            print_loss_total = 0.0
        if (args.iters is not None and it >= args.iters) or \
                (args.seconds is not None and now - start >= args.seconds):
            break

    if device.type == "cuda":
        t0 = time.perf_counter()
        torch.cuda.synchronize()
        times[-1] += time.perf_counter() - t0
    warm = args.warmup_iters if len(times) > args.warmup_iters else 0
    measured = times[warm:]
    print("RESULT script=seq2seq_attention iters=%d warmup_iters=%d iter_ms_mean=%.3f iter_ms_p50=%.3f "
          "elapsed_s=%.2f device=%s" % (
              it, warm, 1000 * sum(measured) / len(measured), 1000 * sorted(measured)[len(measured) // 2],
              time.perf_counter() - start, device.type), flush=True)


if __name__ == "__main__":
    main()
