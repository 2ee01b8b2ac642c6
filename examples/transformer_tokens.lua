-- examples/transformer_tokens.lua -- trains the reference Transformer encoder classifier
-- (examples/models/transformer.lua, attention written in Lua) on a small synthetic
-- order task with padding: sequences of 4..16 tokens (id 1 is padding) holding one 2
-- and one 3 among distractors 4..9; the label says whether the 2 comes first. A bag of
-- tokens cannot tell, so the model has to use the positions through attention.
-- Padding is masked out of the attention and of the mean pool through hp.pad_id.
--   dlua examples/transformer_tokens.lua [steps=600] [hp overrides: d_model=64 heads=8 pool=cls ...]
local dl = require "dlua"
local nn, optim = dl.nn, dl.optim

local here = (arg and arg[0] or ""):match("^(.*/)") or "./"
local transformer = dofile(here .. "models/transformer.lua")

local steps = 400
local hp = {vocab = 9, seq_len = 16, d_model = 32, heads = 4, layers = 2, mlp_ratio = 2, classes = 2,
            pad_id = 1, dropout = 0.1}
for _, a in ipairs(arg or {}) do
  local k, v = a:match("^([%w_]+)=(.*)$")
  if not k then
    steps = assert(math.tointeger(tonumber(a)), "usage: dlua examples/transformer_tokens.lua [steps] [key=value ...]")
  elseif v == "true" or v == "false" then hp[k] = v == "true"
  else hp[k] = tonumber(v) or v end
end

-- n sequences [n, seq_len] padded with 1: one 2 and one 3 among distractors 4..9;
-- label 1 when the 2 comes before the 3, else 2
local function make(n)
  local ids, labels = {}, {}
  for i = 1, n do
    local len = math.random(4, hp.seq_len)
    local row = {}
    for t = 1, hp.seq_len do row[t] = t <= len and math.random(4, 9) or 1 end
    local a = math.random(1, len)
    local b = math.random(1, len - 1)
    if b >= a then b = b + 1 end
    row[a], row[b] = 2, 3
    ids[i], labels[i] = row, a < b and 1 or 2
  end
  return dl.tensor(ids, {dtype = "int64"}), dl.tensor(labels, {dtype = "int64"})
end

math.randomseed(0)
dl.seed(0)
dl.threads(2)
local xtr, ytr = make(4096)
local xte, yte = make(1024)

local model = transformer.build(hp)
print(model)
local opt = optim.Adam{params = model:parameters(), lr = 1e-3}
local sched = optim.schedule.cosine{warmup = 50, steps = steps}
local ce, batch = nn.CrossEntropy(), 64
local t0 = dl.clock()
for s = 1, steps do
  local idx = dl.randperm(xtr:size(1)):narrow(1, 1, batch)
  opt:set_lr(1e-3 * sched(s))
  opt:zero_grad()
  local loss = ce(model(xtr:index_select(1, idx)), ytr:index_select(1, idx))
  loss:backward()
  opt:step()
  if s % 50 == 0 then
    io.write(string.format("\rstep %d/%d loss %.4f (%.0f ex/s)", s, steps, loss:item(), s * batch / (dl.clock() - t0)))
    io.flush()
  end
end
model:eval()
local acc = dl.no_grad(function() return nn.accuracy(model(xte), yte) end)
print(string.format("\ntest accuracy %.4f on %d sequences (chance 0.5)", acc, xte:size(1)))
