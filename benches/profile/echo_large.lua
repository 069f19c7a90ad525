-- wrk: echo.lua's `tools/call echo` with about 3 KiB of arguments (40 small
-- records), to show how the cost of a call grows with what it carries.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["MCP-Protocol-Version"] = "2026-07-28"
wrk.headers["Mcp-Method"] = "tools/call"
wrk.headers["Mcp-Name"] = "echo"
local records = {}
for i = 1, 40 do
  records[i] = '{"id":' .. i .. ',"name":"item ' .. i .. '","tags":["a","b"],"price":' .. i .. '.5,"ok":true}'
end
wrk.body = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"bench 1","records":[' .. table.concat(records, ",") .. ']},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}'
