@_exported public import BotProcess
