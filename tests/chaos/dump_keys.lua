#!lua flags=allow-cross-slot-keys,no-writes
-- tests/chaos/dump_keys.lua -- every key of one Redis node with its type, pttl and
-- content, sorted by name, for run.sh's dump of a round that did not recover
-- (one script: a node with a few hundred keys answers in milliseconds, where a
-- redis-cli per key took minutes on a loaded machine)
local keys, out, cur = {}, {}, '0'
repeat
  local r = redis.call('SCAN', cur, 'COUNT', 1000)
  cur = r[1]
  for _, k in ipairs(r[2]) do keys[#keys + 1] = k end
until cur == '0'
table.sort(keys)
for _, k in ipairs(keys) do
  local t = redis.call('TYPE', k).ok
  local v, step = {}, 1
  if t == 'hash' then v, step = redis.call('HGETALL', k), 2
  elseif t == 'zset' then v, step = redis.call('ZRANGE', k, 0, -1, 'WITHSCORES'), 2
  elseif t == 'string' then v = {redis.call('GET', k)} end
  out[#out + 1] = '-- ' .. k .. ' (' .. t .. ' pttl ' .. redis.call('PTTL', k) .. ')'
  for i = 1, #v, step do
    out[#out + 1] = '   ' .. v[i] .. (step == 2 and ('\t' .. v[i + 1]) or '')
  end
end
return out
