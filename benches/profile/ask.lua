-- wrk: `tools/call ask` walked to its end: ask, answer the InputRequiredResult with its
-- requestState, complete. Keeps state per wrk thread, so run it with -tN -cN (one
-- connection per thread).
local state, key = nil, nil
local id = 0
local meta = '"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}}'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["MCP-Protocol-Version"] = "2026-07-28"
wrk.headers["Mcp-Method"] = "tools/call"
wrk.headers["Mcp-Name"] = "ask"
request = function()
  id = id + 1
  local params
  if state then
    params = '{"name":"ask","arguments":{},' .. meta .. ',"inputResponses":{"' .. key .. '":{"action":"accept","content":{"name":"bench"}}},"requestState":"' .. state .. '"}'
  else
    params = '{"name":"ask","arguments":{},' .. meta .. '}'
  end
  return wrk.format(nil, nil, nil, '{"jsonrpc":"2.0","id":' .. id .. ',"method":"tools/call","params":' .. params .. '}')
end
response = function(status, headers, body)
  local s = body:match('"requestState":"([^"]+)"')
  if s then
    state = s
    key = body:match('"inputRequests":{"([^"]+)"')
  else
    state = nil
  end
end
