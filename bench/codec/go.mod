module payserver/bench/codec

go 1.26.8

require github.com/redis/go-redis/v9 v9.23.0 // indirect

require (
	github.com/bytedance/gopkg v0.1.3 // indirect
	github.com/bytedance/sonic v1.15.0
	github.com/bytedance/sonic/loader v0.5.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/cloudwego/base64x v0.1.6 // indirect
	github.com/goccy/go-json v0.10.5
	github.com/klauspost/cpuid/v2 v2.4.0 // indirect
	github.com/twitchyliquid64/golang-asm v0.15.1 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/arch v0.22.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
)

require payserver v0.0.0

require github.com/sony/gobreaker/v2 v2.4.0 // indirect

replace payserver => ../..
