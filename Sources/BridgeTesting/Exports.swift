@_exported public import BridgeTestSupport
